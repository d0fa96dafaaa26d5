package srq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/logtest"
	"github.com/srqueue/srq/internal/redistest"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// drainTicks fetches and acks every available task of q's first shard and returns their ids.
func drainTicks(t *testing.T, ctx context.Context, e *engine.Engine) []engine.Delivery {
	t.Helper()
	var out []engine.Delivery
	for {
		ds, err := e.Fetch(ctx, "test", 1000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return out
		}
		rs := make([]engine.Receipt, len(ds))
		for i, d := range ds {
			rs[i] = d.Receipt()
		}
		if _, err := e.Ack(ctx, rs); err != nil {
			t.Fatal(err)
		}
		out = append(out, ds...)
	}
}

// tickOf returns the tick time of a tick's task id "sched/<name>/<ms>".
func tickOf(t *testing.T, id string) int64 {
	t.Helper()
	ms, err := strconv.ParseInt(id[strings.LastIndexByte(id, '/')+1:], 10, 64)
	if err != nil {
		t.Fatalf("task id %q is no tick's", id)
	}
	return ms
}

// fireUntil runs s.Fire until it publishes a tick of schedule, and returns those ticks.
func fireUntil(t *testing.T, ctx context.Context, s *srq.Scheduler, schedule string) []srq.FiredTick {
	t.Helper()
	var fired []srq.FiredTick
	waitFor(t, "a tick of "+schedule, func() bool {
		f, err := s.Fire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range f {
			if x.Schedule == schedule {
				fired = append(fired, x)
			}
		}
		return len(fired) > 0
	})
	return fired
}

// TestSchedulersPublishEachTickOnce: five schedulers, each on a client of its own, fire a
// 1-second schedule on a real Redis for five seconds; the ticks published are consecutive seconds,
// each once.
func TestSchedulersPublishEachTickOnce(t *testing.T) {
	t.Parallel()
	q, c := newQueue[string](t, srq.QueueConfig{})
	ctx := testCtx(t)
	if _, err := q.Schedule(ctx, "pulse", "tick", &srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range 5 {
		own := redis.NewClient(c.Options())
		t.Cleanup(func() { _ = own.Close() })
		s, err := srq.NewScheduler(own, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(runCtx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	wg.Wait()
	ds := drainTicks(t, ctx, q.Engine())
	var ticks []int64
	for _, d := range ds {
		ticks = append(ticks, tickOf(t, d.ID))
		if string(d.Payload) == "" {
			t.Errorf("task %s has no payload", d.ID)
		}
	}
	slices.Sort(ticks)
	if len(ticks) < 4 {
		t.Fatalf("published %d ticks in 5 seconds", len(ticks))
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i]-ticks[i-1] != 1000 {
			t.Errorf("ticks %d and %d: %d ms apart, want 1000 (a tick missing or twice)", ticks[i-1], ticks[i], ticks[i]-ticks[i-1])
		}
	}
	in, err := q.GetSchedule(ctx, "pulse")
	if err != nil {
		t.Fatal(err)
	}
	if in.Fired != int64(len(ticks)) || in.LastTick.UnixMilli() != ticks[len(ticks)-1] || in.Missed != 0 {
		t.Errorf("schedule says fired %d, last %v, missed %d; published %d, last %d", in.Fired, in.LastTick, in.Missed,
			len(ticks), ticks[len(ticks)-1])
	}
}

// TestScheduleTaskOptions: a tick's task has the schedule's value and publish options.
func TestScheduleTaskOptions(t *testing.T) {
	t.Parallel()
	type report struct{ Account string }
	q, _ := newQueue[report](t, srq.QueueConfig{})
	ctx := testCtx(t)
	opts := &srq.ScheduleOpts{Cron: "* * * * * *", Publish: srq.PublishOpts{Partition: "acct-7", Ordered: true,
		Priority: 5, MaxAttempts: 3, Headers: map[string]string{"k": "v"}}}
	if _, err := q.Schedule(ctx, "r", report{"acct-7"}, opts); err != nil {
		t.Fatal(err)
	}
	s, err := srq.NewScheduler(redistest.Client(t), srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fired := fireUntil(t, ctx, s, "r")
	ds := drainTicks(t, ctx, q.Engine())
	if len(ds) != 1 || ds[0].ID != fired[0].ID || ds[0].ID != srq.TickID("r", fired[0].Tick) {
		t.Fatalf("fired %+v, fetched %+v", fired, ds)
	}
	d := ds[0]
	var v report
	if err := (codec.MsgPack{}).Unmarshal(d.Payload, &v); err != nil || v.Account != "acct-7" {
		t.Errorf("payload %v %v", v, err)
	}
	if d.Partition != "!acct-7" || d.Priority != 5 || d.MaxAttempts != 3 || d.Headers["k"] != "v" ||
		!d.AvailableAt.Equal(fired[0].Tick) {
		t.Errorf("delivery %+v", d)
	}
}

// TestScheduleBadInput: each refused schedule fails with a clear error and stores nothing.
func TestScheduleBadInput(t *testing.T) {
	t.Parallel()
	q, c := newQueue[any](t, srq.QueueConfig{Codec: codec.JSON{}})
	ctx := testCtx(t)
	cases := []struct {
		name string
		v    any
		opts *srq.ScheduleOpts
		want string
	}{
		{"invalid cron", 1, &srq.ScheduleOpts{Cron: "every morning"}, "cron"},
		{"unknown zone", 1, &srq.ScheduleOpts{Cron: "0 9 * * *", TimeZone: "Europe/Atlantis"}, "time zone"},
		{"short interval", 1, &srq.ScheduleOpts{Every: 100 * time.Millisecond}, "minimum"},
		{"no timing", 1, &srq.ScheduleOpts{}, "Cron or Every"},
		{"nil opts", 1, nil, "Cron or Every"},
		{"an id", 1, &srq.ScheduleOpts{Every: time.Minute, Publish: srq.PublishOpts{ID: "x"}}, "id"},
		{"unencodable", make(chan int), &srq.ScheduleOpts{Every: time.Minute}, "encode"},
	}
	for _, cs := range cases {
		_, err := q.Schedule(ctx, "s", cs.v, cs.opts)
		if err == nil || !strings.Contains(err.Error(), cs.want) {
			t.Errorf("%s: %v, want an error saying %q", cs.name, err, cs.want)
		}
		if cs.name != "unencodable" && !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", cs.name, err)
		}
	}
	if _, err := q.GetSchedule(ctx, "s"); !errors.Is(err, srq.ErrScheduleNotFound) {
		t.Errorf("GetSchedule: %v", err)
	}
	keys, _, err := c.Scan(ctx, 0, "srq:{"+q.Name()+"}*", 100).Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys of the queue: %v %v", keys, err)
	}
	if n, err := c.HExists(ctx, engine.RegistryKey("srq"), q.Name()).Result(); err != nil || n {
		t.Errorf("the queue was registered: %v %v", n, err)
	}
}

// TestScheduleOperations: pause, resume, trigger, list and delete through the root API.
func TestScheduleOperations(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 3})
	ctx := testCtx(t)
	for i, name := range []string{"b", "a", "c"} {
		if _, err := q.Schedule(ctx, name, i, &srq.ScheduleOpts{Cron: "0 3 * * *", TimeZone: "Asia/Tokyo",
			Publish: srq.PublishOpts{Partition: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PauseSchedule(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	list, err := q.Schedules(ctx, "", 10)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for i, want := range []string{"a", "b", "c"} {
		in := list[i]
		if in.Name != want || in.Paused != (want == "b") || in.Cron != "0 3 * * *" || in.TimeZone != "Asia/Tokyo" {
			t.Errorf("schedule %d: %+v", i, in)
		}
		if want != "b" && in.Next.In(time.UTC).Hour() != 18 { // 03:00 in Tokyo is 18:00 UTC
			t.Errorf("schedule %s: next %v", want, in.Next)
		}
	}
	id, err := q.TriggerSchedule(ctx, "b")
	if err != nil || !strings.HasPrefix(id, "sched/b/now-") {
		t.Fatalf("trigger: %q %v", id, err)
	}
	if _, err := q.ShardOf("b").Task(ctx, id); err != nil {
		t.Errorf("the triggered task: %v", err)
	}
	if err := q.ResumeSchedule(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if in, err := q.GetSchedule(ctx, "b"); err != nil || in.Paused || in.Next.IsZero() {
		t.Errorf("resumed: %+v %v", in, err)
	}
	if ok, err := q.DeleteSchedule(ctx, "a"); !ok || err != nil {
		t.Errorf("delete: %v %v", ok, err)
	}
	for _, err := range []error{q.PauseSchedule(ctx, "a"), q.ResumeSchedule(ctx, "a")} {
		if !errors.Is(err, srq.ErrScheduleNotFound) || !errors.Is(err, srq.ErrNotFound) {
			t.Errorf("a deleted schedule: %v", err)
		}
	}
	if list, err := q.Schedules(ctx, "a", 10); err != nil || len(list) != 2 || list[0].Name != "b" {
		t.Errorf("list after a: %+v %v", list, err)
	}
}

// TestScheduleFlowTick: a flow schedule publishes the flow across two queues once per tick; its
// steps know their flow.
func TestScheduleFlowTick(t *testing.T) {
	t.Parallel()
	orders, c := newQueue[string](t, srq.QueueConfig{})
	mail, err := srq.NewQueue[string](c, srq.QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	// The scheduler below fires every registered queue's schedules; a name of this run's own keeps
	// out the schedules other tests (or earlier runs, with -count) left on the shared server.
	name := "billing-" + orders.Name()
	bill := orders.Step("bill", "monthly", nil)
	send := mail.Step("send", "invoice", nil).After(bill)
	if _, err := orders.ScheduleFlow(ctx, name, &srq.Flow{Steps: []*srq.Step{bill, send}},
		&srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	// The first step must be of the schedule's queue.
	if _, err := mail.ScheduleFlow(ctx, "x", &srq.Flow{Steps: []*srq.Step{bill}},
		&srq.ScheduleOpts{Every: time.Second}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("a flow whose first step is of another queue: %v", err)
	}
	s, err := srq.NewScheduler(c, srq.SchedulerConfig{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fired := fireUntil(t, ctx, s, name)
	fid := fired[0].ID
	if !fired[0].Flow || fid != srq.TickID(name, fired[0].Tick) {
		t.Fatalf("fired %+v", fired)
	}
	info, err := orders.Flow(ctx, fid)
	if err != nil || len(info.Steps) != 2 {
		t.Fatalf("flow %s: %+v %v", fid, info, err)
	}
	ds := drainTicks(t, ctx, orders.Engine())
	if len(ds) == 0 || ds[0].ID != fid+"/bill" || ds[0].Headers["srq-flow"] != fid {
		t.Errorf("first step %+v", ds)
	}
}

// TestSchedulerIsOneAtATime: Run and Fire refuse to run twice at once.
func TestSchedulerIsOneAtATime(t *testing.T) {
	t.Parallel()
	s, err := srq.NewScheduler(redistest.Client(t), srq.SchedulerConfig{Queues: []string{redistest.Queue(t)}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	start := func() { go func() { done <- s.Run(ctx) }() }
	start()
	waitFor(t, "Fire to find Run running", func() bool {
		select {
		case err := <-done: // Run met a Fire of this loop: it refused, as it should
			if !errors.Is(err, srq.ErrRunning) {
				t.Fatalf("Run: %v", err)
			}
			start()
		default:
		}
		_, err := s.Fire(ctx)
		return errors.Is(err, srq.ErrRunning)
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := srq.NewScheduler(nil, srq.SchedulerConfig{}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := srq.NewScheduler(redistest.Client(t), srq.SchedulerConfig{Queues: []string{"a{b}"}}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("bad queue name: %v", err)
	}
}

// A scheduler of named queues skips one whose registered shard count is unusable, logging it, and
// fires the others, as a scheduler of every queue does; NewScheduler refuses an invalid prefix also
// without Queues.
func TestSchedulerSkipsAnUnusableQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	prefix := "sched" + strings.ReplaceAll(redistest.Queue(t), "/", "-")
	c := redistest.Client(t)
	good, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "good", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), c, prefix) })
	if err := c.HSet(ctx, engine.RegistryKey(prefix), "bad", "x").Err(); err != nil {
		t.Fatal(err)
	}
	for i, queues := range [][]string{{"good", "bad"}, nil} {
		name := fmt.Sprint("s", i) // a new schedule, due in a second
		if _, err := good.Schedule(ctx, name, 1, &srq.ScheduleOpts{Every: time.Second}); err != nil {
			t.Fatal(err)
		}
		rec := &logtest.Recorder{}
		s, err := srq.NewScheduler(c, srq.SchedulerConfig{Prefix: prefix, Queues: queues, Logger: slog.New(rec)})
		if err != nil {
			t.Fatal(err)
		}
		var fired []srq.FiredTick
		waitFor(t, "the good queue's tick", func() bool {
			fired, err = s.Fire(ctx)
			if err != nil {
				t.Fatalf("Queues %v: %v", queues, err)
			}
			return len(fired) > 0
		})
		if !slices.ContainsFunc(fired, func(f srq.FiredTick) bool { return f.Schedule == name }) {
			t.Errorf("Queues %v: fired %+v, want the good queue's tick of %s", queues, fired, name)
		}
		if len(rec.Find("srq: scheduler skips a queue")) == 0 {
			t.Errorf("Queues %v: the unusable queue was not logged", queues)
		}
	}
	for _, bad := range []string{"a{", "a}", "x\xff"} {
		if _, err := srq.NewScheduler(c, srq.SchedulerConfig{Prefix: bad}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("NewScheduler with prefix %q and no Queues: %v, want ErrInvalid", bad, err)
		}
	}
}
