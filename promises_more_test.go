package srq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/logtest"
	"github.com/srqueue/srq/lua"
)

// promiseCodec is MsgPack under a name of its own, recording the type of every value it decodes
// into: which queue's codec decoded what.
type promiseCodec struct {
	name string
	mu   sync.Mutex
	into []string
}

func (c *promiseCodec) Name() string                  { return c.name }
func (c *promiseCodec) Marshal(v any) ([]byte, error) { return codec.MsgPack{}.Marshal(v) }
func (c *promiseCodec) Unmarshal(data []byte, v any) error {
	c.mu.Lock()
	c.into = append(c.into, fmt.Sprintf("%T", v))
	c.mu.Unlock()
	return codec.MsgPack{}.Unmarshal(data, v)
}

// decoded reports whether c decoded a value of type typ (as %T prints it).
func (c *promiseCodec) decoded(typ string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.into {
		if s == typ {
			return true
		}
	}
	return false
}

type promiseQuote struct{ Cents int }

// TestPromiseChildResultsUseTheParentsCodec: docs/workflows.md "Results are decoded with the codec
// of the **parent's** queue". A parent on one queue spawns a child on a queue with another codec;
// ChildResult and ChildResults decode the child's result with the parent queue's codec, never the
// child's.
func TestPromiseChildResultsUseTheParentsCodec(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	parentCodec, childCodec := &promiseCodec{name: "parent-codec"}, &promiseCodec{name: "child-codec"}
	parents, c := newQueue[string](t, srq.QueueConfig{Codec: parentCodec})
	kids, err := srq.NewQueue[int](c, srq.QueueConfig{Name: parents.Name() + "-kids", Codec: childCodec})
	if err != nil {
		t.Fatal(err)
	}
	kw, err := srq.NewWorker(kids, srq.ResultHandlerFunc[int, promiseQuote](func(ctx context.Context, t *srq.Task[int]) (promiseQuote, error) {
		return promiseQuote{Cents: t.Value * 100}, nil
	}), srq.WorkerConfig{Logger: quiet, PollWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		one    promiseQuote
		oneErr error
		all    map[string]promiseQuote
		allErr error
	}
	got := make(chan read, 1)
	pw, err := srq.NewWorker(parents, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		_, again, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if !again {
			if _, err := srq.Spawn(ctx, t.Delivery, kids, "quote", 7, nil); err != nil {
				return err
			}
			if err := t.SetState(1); err != nil {
				return err
			}
			return srq.WaitChildren()
		}
		var r read
		r.one, r.oneErr = srq.ChildResult[promiseQuote](ctx, t.Delivery, "quote")
		r.all, r.allErr = srq.ChildResults[promiseQuote](ctx, t.Delivery)
		got <- r
		return nil
	}), srq.WorkerConfig{Logger: quiet, PollWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	runWorker(t, pw)
	if _, err := parents.Publish(ctx, "order", nil); err != nil {
		t.Fatal(err)
	}
	var r read
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("the parent never ran after its child")
	}
	if r.oneErr != nil || r.one.Cents != 700 || r.allErr != nil || r.all["quote"].Cents != 700 {
		t.Fatalf("ChildResult %+v, %v; ChildResults %+v, %v; want Cents 700", r.one, r.oneErr, r.all, r.allErr)
	}
	const typ = "*srq_test.promiseQuote"
	if !parentCodec.decoded(typ) {
		t.Errorf("the parent queue's codec never decoded a %s", typ)
	}
	if childCodec.decoded(typ) {
		t.Errorf("the child queue's codec decoded a %s: children's results must be decoded with the parent's", typ)
	}
}

// TestPromiseFlowKeepDefault: docs/flows.md "A flow keeps its steps' outcomes ... for Flow.Keep
// (7 days by default) after the flow ended", and flow.go's Keep "Default 7 days". A flow published
// with Keep unset records 7 days, and its retention ends 7 days after it ended.
func TestPromiseFlowKeepDefault(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet, PollWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := srq.PublishFlow(ctx, &srq.Flow{ID: "kept", Steps: []*srq.Step{q.Step("only", "v", nil)}})
	if err != nil || res.Duplicate {
		t.Fatalf("PublishFlow: %+v, %v", res, err)
	}
	runWorker(t, w)
	var info srq.FlowInfo
	waitFor(t, "the flow to end", func() bool {
		info, err = q.Flow(ctx, "kept")
		if err != nil {
			t.Fatal(err)
		}
		return info.State == srq.FlowCompleted
	})
	const week = 7 * 24 * time.Hour
	if info.Keep != week {
		t.Errorf("the flow's Keep is %v, want %v (the documented default)", info.Keep, week)
	}
	score, err := c.ZScore(ctx, q.Engine().Keys().FlowsEnded(), "kept").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := info.Ended.Add(week).UnixMilli(); int64(score) != want {
		t.Errorf("the flow's retention ends at %d, want %d (its end, %v, plus 7 days)", int64(score), want, info.Ended)
	}
}

// promiseDueCalls records the calls of schedule_due.lua a client makes: the most names each
// asked for (its last argument) and how many it got.
type promiseDueCalls struct {
	processHookOnly
	shas  scriptSet
	mu    sync.Mutex
	limit []any
	names []int
}

func (h *promiseDueCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		run := h.shas.runs(cmd)
		if strings.EqualFold(cmd.Name(), "eval") { // by its source: a server that lacked it
			run = h.shas[lua.SHA1(fmt.Sprint(cmd.Args()[1]))]
		}
		if !run {
			return err
		}
		args := cmd.Args()
		rows, ok := cmd.(*redis.Cmd).Val().([]any)
		if err != nil || !ok {
			return err // refused unrun (a script not loaded yet), and sent again
		}
		n := len(rows) - 2 // now, the next due time, then the names
		h.mu.Lock()
		h.limit = append(h.limit, args[len(args)-1])
		h.names = append(h.names, n)
		h.mu.Unlock()
		return err
	}
}

// promiseMakeDue makes schedule name's next tick, tick, due now: as if the server's clock had
// reached it. It writes what a firing reads: the record's next tick and the due index.
func promiseMakeDue(ctx context.Context, t *testing.T, p redis.Pipeliner, k engine.Keys, name string, tick int64) {
	t.Helper()
	p.HSet(ctx, k.Schedule(name), "n", tick)
	p.ZAdd(ctx, k.SchedulesDue(), redis.Z{Score: float64(tick), Member: name})
}

// promiseLastSecond returns the server's clock, in Unix ms, rounded down to a whole second.
func promiseLastSecond(ctx context.Context, t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.Truncate(time.Second).UnixMilli()
}

// TestPromiseFireAtMost100SchedulesACall: docs/schedules.md "A firing reads the due ones from
// crondue (schedule_due.lua: at most 100 per call ...)" and "one schedule_due.lua call per shard
// (O(log n + due), at most 100 schedules)". With 110 schedules due, a firing asks for 100 names a
// call: the first call gets 100, the next the other 10, and all 110 ticks are published.
func TestPromiseFireAtMost100SchedulesACall(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	const n, day = 110, 24 * time.Hour
	for i := range n {
		opts := &srq.ScheduleOpts{Every: day, Grace: 2 * day}
		if _, err := q.Schedule(ctx, fmt.Sprintf("s%03d", i), "v", opts); err != nil {
			t.Fatal(err)
		}
	}
	// The last midnight (UTC): a tick of every schedule, within its Grace, so each firing publishes
	// it; their next ticks are the next midnight, not due again while the test runs.
	tick := promiseLastSecond(ctx, t, c)
	tick -= tick % day.Milliseconds()
	k := q.Engine().Keys()
	pipe := c.Pipeline()
	for i := range n {
		promiseMakeDue(ctx, t, pipe, k, fmt.Sprintf("s%03d", i), tick)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	own := redis.NewClient(c.Options())
	t.Cleanup(func() { _ = own.Close() })
	calls := &promiseDueCalls{shas: scriptSHAs(t, "schedule_due")}
	own.AddHook(calls)
	s, err := srq.NewScheduler(own, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := s.Fire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for i, l := range calls.limit {
		if fmt.Sprint(l) != "100" {
			t.Errorf("schedule_due call %d asked for %v names, want 100", i, l)
		}
	}
	if len(calls.names) != 2 || calls.names[0] != 100 || calls.names[1] != n-100 {
		t.Errorf("schedule_due calls returned %v names, want 100 then %d", calls.names, n-100)
	}
	seen := map[string]bool{}
	for _, f := range fired {
		if f.Tick.UnixMilli() != tick || seen[f.Schedule] {
			t.Errorf("fired %+v: want each schedule's tick at %d once", f, tick)
		}
		seen[f.Schedule] = true
	}
	if len(seen) != n {
		t.Errorf("fired %d schedules, want %d", len(seen), n)
	}
}

// TestPromiseUnloadableTimeZoneLeftDue: docs/schedules.md "A process that cannot [load the
// schedule's time zone] leaves the schedule due, logs an error, and other processes fire it", and
// docs/troubleshooting.md "logs an error and leaves the schedule to others". A schedule whose
// stored zone this process cannot load: a Scheduler logs the error naming the zone and writes
// nothing (the record and its due time are as they were, no task is published); a process that
// can read the zone then publishes that very tick.
func TestPromiseUnloadableTimeZoneLeftDue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	// Daily at midnight, with a Grace of two days: the last midnight is the one tick due in the test.
	opts := &srq.ScheduleOpts{Cron: "0 0 * * *", TimeZone: "UTC", Grace: 48 * time.Hour}
	if _, err := q.Schedule(ctx, "tz", "v", opts); err != nil {
		t.Fatal(err)
	}
	k := q.Engine().Keys()
	setZone := func(zone string) {
		t.Helper()
		raw, err := c.HGet(ctx, k.Schedule("tz"), "def").Result()
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		if err := json.Unmarshal([]byte(raw), &def); err != nil {
			t.Fatal(err)
		}
		if def["tz"] == nil {
			t.Fatalf("the stored definition %s has no tz field", raw)
		}
		def["tz"] = zone
		b, _ := json.Marshal(def)
		if err := c.HSet(ctx, k.Schedule("tz"), "def", b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const zone = "Nowhere/Atlantis"
	setZone(zone) // as a schedule stored by a process with a zone database this one lacks
	tick := promiseLastSecond(ctx, t, c)
	tick -= tick % (24 * time.Hour).Milliseconds()
	pipe := c.Pipeline()
	promiseMakeDue(ctx, t, pipe, k, "tz", tick)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := c.HGetAll(ctx, k.Schedule("tz")).Result()
	if err != nil {
		t.Fatal(err)
	}

	rec := &logtest.Recorder{}
	s, err := srq.NewScheduler(c, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	id := srq.TickID("tz", time.UnixMilli(tick))
	// Run's first pass fires at once: its error is logged within moments, or the tick published.
	for deadline := time.Now().Add(10 * time.Second); len(rec.Find("srq: fire schedules")) == 0; time.Sleep(5 * time.Millisecond) {
		if _, err := q.Engine().Task(ctx, id); err == nil {
			t.Fatalf("task %s was published by a process that cannot load the zone", id)
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduler logged no error in 10s")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := rec.Find("srq: fire schedules")[0]
	if r.Level != slog.LevelError || !strings.Contains(fmt.Sprint(logtest.Attr(r, "err")), zone) {
		t.Errorf("logged %v %q err=%v, want an error naming the zone %s", r.Level, r.Message, logtest.Attr(r, "err"), zone)
	}
	after, err := c.HGetAll(ctx, k.Schedule("tz")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the record changed: %v, was %v", after, before)
	}
	if score, err := c.ZScore(ctx, k.SchedulesDue(), "tz").Result(); err != nil || int64(score) != tick {
		t.Errorf("due at %v (%v), want still %d", score, err, tick)
	}
	if _, err := q.Engine().Task(ctx, id); err == nil {
		t.Errorf("task %s was published by a process that cannot load the zone", id)
	}

	// A process that can load the zone fires the tick left due.
	setZone("UTC")
	other, err := srq.NewScheduler(c, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := other.Fire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fired) == 0 || fired[0].ID != id {
		t.Fatalf("the other process fired %+v, want the tick left due, %s", fired, id)
	}
}
