package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// schedBase is the embedded Redis's clock at the start of a schedule test: a whole second.
var schedBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// schedBundle is a queue on an embedded Redis whose clock the test drives, with one engine per
// replica, each on a client of its own: schedulers in separate processes.
type schedBundle struct {
	t    *testing.T
	ctx  context.Context
	mr   *miniredis.Miniredis
	engs []*Engine
	seen map[string]int // task ids fetched so far, and how often
}

func newSchedBundle(t *testing.T, replicas int) *schedBundle {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(schedBase)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b := &schedBundle{t: t, ctx: ctx, mr: mr, seen: map[string]int{}}
	for range replicas {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		e, err := New(c, Config{Queue: "sched"})
		if err != nil {
			t.Fatal(err)
		}
		b.engs = append(b.engs, e)
	}
	return b
}

// at sets the server's clock to d after schedBase.
func (b *schedBundle) at(d time.Duration) { b.mr.SetTime(schedBase.Add(d)) }

func (b *schedBundle) put(def ScheduleDef) ScheduleInfo {
	b.t.Helper()
	in, err := b.engs[0].PutSchedule(b.ctx, &def)
	if err != nil {
		b.t.Fatalf("put %s: %v", def.Name, err)
	}
	return in
}

func (b *schedBundle) get(name string) ScheduleInfo {
	b.t.Helper()
	in, err := b.engs[0].GetSchedule(b.ctx, name)
	if err != nil {
		b.t.Fatalf("get %s: %v", name, err)
	}
	return in
}

// fire runs FireSchedules on every replica at once and returns the ticks they published.
func (b *schedBundle) fire() []FiredTick {
	b.t.Helper()
	var mu sync.Mutex
	var all []FiredTick
	var wg sync.WaitGroup
	for _, e := range b.engs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.FireSchedules(b.ctx, 100)
			if err != nil {
				b.t.Errorf("fire: %v", err)
			}
			mu.Lock()
			all = append(all, res.Fired...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(all, func(x, y FiredTick) int { return x.Tick.Compare(y.Tick) })
	return all
}

// drain fetches and acks every available task, records their ids, and returns them with their
// payloads, in fetch order.
func (b *schedBundle) drain() (ids []string, payloads []string) {
	b.t.Helper()
	for {
		ds, err := b.engs[0].Fetch(b.ctx, "drain", 1000, time.Minute)
		if err != nil {
			b.t.Fatal(err)
		}
		if len(ds) == 0 {
			return ids, payloads
		}
		rs := make([]Receipt, len(ds))
		for i, d := range ds {
			ids = append(ids, d.ID)
			payloads = append(payloads, string(d.Payload))
			b.seen[d.ID]++
			rs[i] = d.Receipt()
		}
		if _, err := b.engs[0].Ack(b.ctx, rs); err != nil {
			b.t.Fatal(err)
		}
	}
}

func tickIDs(name string, secs ...int) []string {
	out := make([]string, len(secs))
	for i, s := range secs {
		out[i] = tickID(name, schedBase.Add(time.Duration(s)*time.Second).UnixMilli())
	}
	return out
}

func everySecond(name string) ScheduleDef {
	return ScheduleDef{Name: name, ScheduleTiming: ScheduleTiming{Every: time.Second}, Task: &Message{Payload: []byte("v1")}}
}

// TestFireOncePerTickManyReplicas: five schedulers fire a 1-second schedule together, with the
// clock moved in steps that do and do not meet the ticks, for 30 seconds: every tick is published
// once, none is missing, and acked or dead ticks are not published again.
func TestFireOncePerTickManyReplicas(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 5)
	b.put(everySecond("pulse"))
	var fired []FiredTick
	for ms := 0; ms <= 30_000; ms += 250 {
		b.at(time.Duration(ms) * time.Millisecond)
		fired = append(fired, b.fire()...)
		if ms%1000 == 500 {
			b.drain() // acked ticks are gone from Redis: they must not come back
		}
	}
	b.drain()
	var want []int
	for s := 1; s <= 30; s++ {
		want = append(want, s)
	}
	wantIDs := tickIDs("pulse", want...)
	var got []string
	for id, n := range b.seen {
		if n != 1 {
			t.Errorf("task %s fetched %d times", id, n)
		}
		got = append(got, id)
	}
	slices.Sort(got)
	slices.Sort(wantIDs)
	if !slices.Equal(got, wantIDs) {
		t.Errorf("published %d ticks %v\nwant %d %v", len(got), got, len(wantIDs), wantIDs)
	}
	if len(fired) != 30 {
		t.Errorf("FireSchedules reported %d ticks, want 30", len(fired))
	}
	in := b.get("pulse")
	if in.Fired != 30 || in.Missed != 0 || !in.LastTick.Equal(schedBase.Add(30*time.Second)) ||
		!in.Next.Equal(schedBase.Add(31*time.Second)) {
		t.Errorf("info %+v", in)
	}
}

// TestFireAfterOutage: nothing fires for 10 seconds; the next firing follows the policy.
func TestFireAfterOutage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		catchUp int
		want    []int // seconds of the ticks published by the firing after the outage
		missed  int64
	}{
		{"skip", 0, []int{11}, 10},
		{"catch up 3", 3, []int{8, 9, 10, 11}, 7},
		{"catch up all", 50, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newSchedBundle(t, 2)
			def := everySecond("s")
			def.CatchUp = c.catchUp
			b.put(def)
			// Down from 0.5s to 11.2s: ticks 1 to 10 pass unfired; 11 is on time.
			b.at(11200 * time.Millisecond)
			fired := b.fire()
			ids, _ := b.drain()
			if want := tickIDs("s", c.want...); !slices.Equal(ids, want) {
				t.Errorf("published %v, want %v (in tick order)", ids, want)
			}
			if len(fired) != len(c.want) {
				t.Errorf("reported %d fired", len(fired))
			}
			in := b.get("s")
			if in.Missed != c.missed || in.Fired != int64(len(c.want)) || !in.Next.Equal(schedBase.Add(12*time.Second)) {
				t.Errorf("missed %d fired %d next %v, want %d %d %v", in.Missed, in.Fired, in.Next, c.missed,
					len(c.want), schedBase.Add(12*time.Second))
			}
			// And on as usual.
			b.at(12 * time.Second)
			b.fire()
			if ids, _ := b.drain(); !slices.Equal(ids, tickIDs("s", 12)) {
				t.Errorf("then published %v", ids)
			}
		})
	}
}

// TestFireReportsMissed: FireSchedules says which schedule skipped how many ticks.
func TestFireReportsMissed(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	b.put(everySecond("s"))
	b.at(5500 * time.Millisecond)
	res, err := b.engs[0].FireSchedules(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missed) != 1 || res.Missed[0] != (MissedTicks{Schedule: "s", Count: 4}) || len(res.Fired) != 1 {
		t.Errorf("result %+v", res)
	}
	if res.Wait != 500*time.Millisecond || res.More {
		t.Errorf("wait %v more %v, want 500ms, false", res.Wait, res.More)
	}
}

func TestSchedulePauseResume(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	b.put(everySecond("s"))
	b.at(time.Second)
	b.fire()
	if err := b.engs[0].PauseSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if in := b.get("s"); !in.Paused || !in.Next.IsZero() {
		t.Errorf("paused: %+v", in)
	}
	for s := 2; s <= 6; s++ {
		b.at(time.Duration(s) * time.Second)
		if f := b.fire(); len(f) != 0 {
			t.Errorf("paused schedule fired %v", f)
		}
	}
	// Pausing again changes nothing; resuming starts at the first tick after now.
	if err := b.engs[0].PauseSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	b.at(6300 * time.Millisecond)
	if err := b.engs[0].ResumeSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if in := b.get("s"); in.Paused || !in.Next.Equal(schedBase.Add(7*time.Second)) {
		t.Errorf("resumed: %+v", in)
	}
	b.at(7 * time.Second)
	b.fire()
	if ids, _ := b.drain(); !slices.Equal(ids, tickIDs("s", 1, 7)) {
		t.Errorf("published %v, want ticks 1 and 7", ids)
	}
	for _, f := range []func(context.Context, string) error{b.engs[0].PauseSchedule, b.engs[0].ResumeSchedule} {
		if err := f(b.ctx, "nope"); !errors.Is(err, ErrScheduleNotFound) || !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown schedule: %v", err)
		}
	}
}

// TestScheduleUpsert: a put of a running schedule keeps its ticks when its timing is the same, and
// restarts them when it changed; its state (counters, pause) stays.
func TestScheduleUpsert(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	first := b.put(everySecond("s"))
	b.at(time.Second)
	b.fire()
	b.at(1500 * time.Millisecond)
	def := everySecond("s")
	def.Task.Payload = []byte("v2")
	in := b.put(def)
	if !in.Next.Equal(schedBase.Add(2*time.Second)) || in.Fired != 1 || !in.Created.Equal(first.Created) {
		t.Errorf("same timing: %+v", in)
	}
	b.at(2 * time.Second)
	b.fire()
	if _, payloads := b.drain(); !slices.Equal(payloads, []string{"v1", "v2"}) {
		t.Errorf("payloads %v", payloads)
	}
	b.at(2500 * time.Millisecond)
	def.Every = 10 * time.Second
	if in := b.put(def); !in.Next.Equal(schedBase.Add(10*time.Second)) || in.Fired != 2 {
		t.Errorf("new timing: %+v", in)
	}
	b.at(9 * time.Second)
	if f := b.fire(); len(f) != 0 {
		t.Errorf("fired %v before the new timing's first tick", f)
	}
	if err := b.engs[0].PauseSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if in := b.put(def); !in.Paused {
		t.Error("a put resumed a paused schedule")
	}
}

// TestScheduleInvalidWritesNothing: every bad input fails with ErrInvalid and stores nothing.
func TestScheduleInvalidWritesNothing(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	other, err := New(b.engs[0].client, Config{Queue: "other"})
	if err != nil {
		t.Fatal(err)
	}
	task := &Message{Payload: []byte("x")}
	big := &Message{Payload: make([]byte, DefaultMaxPayloadBytes+1)}
	cases := map[string]ScheduleDef{
		"bad cron":          {Name: "a", ScheduleTiming: ScheduleTiming{Cron: "every day"}, Task: task},
		"unknown zone":      {Name: "a", ScheduleTiming: ScheduleTiming{Cron: "0 3 * * *", TimeZone: "Nowhere/City"}, Task: task},
		"short interval":    {Name: "a", ScheduleTiming: ScheduleTiming{Every: 500 * time.Millisecond}, Task: task},
		"no timing":         {Name: "a", ScheduleTiming: ScheduleTiming{}, Task: task},
		"no work":           {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}},
		"task and flow":     {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: task, Flow: &FlowSpec{}},
		"bad name":          {Name: "a/b", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: task},
		"task with id":      {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: &Message{ID: "x"}},
		"task with at":      {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: &Message{At: time.Now()}},
		"task with wait":    {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: &Message{Wait: true}},
		"oversized payload": {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: big},
		"bad partition":     {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Task: &Message{Partition: partition.Key("\xff")}},
		"negative jitter":   {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute, Jitter: -time.Second}, Task: task},
		"catch up too far":  {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute, CatchUp: MaxCatchUp + 1}, Task: task},
		"tiny grace":        {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute, Grace: time.Millisecond}, Task: task},
		"flow with id": {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Flow: &FlowSpec{ID: "f", Steps: []FlowStep{
			{Name: "x", Engine: b.engs[0]}}}},
		"flow kept briefly": {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Flow: &FlowSpec{Keep: time.Minute, Steps: []FlowStep{
			{Name: "x", Engine: b.engs[0]}}}},
		"flow elsewhere": {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Flow: &FlowSpec{Steps: []FlowStep{
			{Name: "x", Engine: other}}}},
		"flow with a cycle": {Name: "a", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Flow: &FlowSpec{Steps: []FlowStep{
			{Name: "x", Engine: b.engs[0], After: []FlowEdge{{Parent: "y"}}},
			{Name: "y", Engine: b.engs[0], After: []FlowEdge{{Parent: "x"}}}}}},
	}
	for name, def := range cases {
		_, err := b.engs[0].PutSchedule(b.ctx, &def)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		} else if n := strings.Count(err.Error(), ErrInvalid.Error()); n != 1 {
			t.Errorf("%s: %q says %q %d times, want once", name, err, ErrInvalid.Error(), n)
		}
	}
	if keys := b.mr.Keys(); len(keys) != 0 {
		t.Errorf("keys written: %v", keys)
	}
}

// TestFlowSchedule: a flow schedule publishes one flow per tick, whose id is the tick's, and whose
// steps carry it in the flow header; a claim whose publisher died is taken over after
// flowRecoverAfter, and publishes the flow only when it does not exist yet.
func TestFlowSchedule(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 2)
	e := b.engs[0]
	flow := &FlowSpec{Steps: []FlowStep{
		{Name: "a", Engine: e, Message: Message{Payload: []byte("a")}},
		{Name: "b", Engine: e, Message: Message{Payload: []byte("b")}, After: []FlowEdge{{Parent: "a"}}},
	}}
	b.put(ScheduleDef{Name: "f", ScheduleTiming: ScheduleTiming{Every: time.Minute}, Flow: flow, FlowHeader: "srq-flow"})
	b.at(time.Minute)
	fired := b.fire()
	id := tickID("f", schedBase.Add(time.Minute).UnixMilli())
	if len(fired) != 1 || fired[0].ID != id || !fired[0].Flow {
		t.Fatalf("fired %+v", fired)
	}
	info, err := e.Flow(b.ctx, id)
	if err != nil || len(info.Steps) != 2 {
		t.Fatalf("flow %s: %+v %v", id, info, err)
	}
	ds, err := e.Fetch(b.ctx, "c", 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != StepID(id, "a") || ds[0].Headers["srq-flow"] != id {
		t.Fatalf("fetched %+v %v", ds, err)
	}
	if in := b.get("f"); len(in.PendingFlows) != 0 || in.Fired != 1 || len(in.Flow) != 2 || in.Flow[1].After[0] != "a" {
		t.Errorf("info %+v", in)
	}

	// A scheduler that claimed the ticks at 2 and 3 minutes and died: the first of them it had
	// published, the second not.
	t2, t3 := schedBase.Add(2*time.Minute).UnixMilli(), schedBase.Add(3*time.Minute).UnixMilli()
	key := e.keys.Schedule("f")
	b.at(2 * time.Minute)
	if _, err := PublishFlow(b.ctx, e.flowOf(mustRecord(t, e, "f").def.Flow, tickID("f", t2), 0)); err != nil {
		t.Fatal(err)
	}
	b.at(3 * time.Minute)
	b.mr.HSet(key, "fp", fmt.Sprintf("[%d,%d]", t2, t3), "fa", strconv.FormatInt(t3, 10), "n",
		strconv.FormatInt(schedBase.Add(4*time.Minute).UnixMilli(), 10), "fc", "3")
	b.mr.ZAdd(e.keys.SchedulesDue(), float64(t3+flowRecoverAfter.Milliseconds()), "f")
	b.at(3*time.Minute + flowRecoverAfter - time.Second)
	if f := b.fire(); len(f) != 0 {
		t.Errorf("fired %v while the claim is fresh", f)
	}
	// The take-over comes with the next tick (4 minutes): both claims and the new tick publish.
	b.at(3*time.Minute + flowRecoverAfter)
	b.fire()
	for _, m := range []int{2, 3, 4} {
		fid := tickID("f", schedBase.Add(time.Duration(m)*time.Minute).UnixMilli())
		if _, err := e.Flow(b.ctx, fid); err != nil {
			t.Errorf("flow %s: %v", fid, err)
		}
	}
	if in := b.get("f"); len(in.PendingFlows) != 0 || in.Fired != 4 {
		t.Errorf("after the take-over: %+v", in)
	}
}

func mustRecord(t *testing.T, e *Engine, name string) *schedRecord {
	t.Helper()
	h, err := e.client.HGetAll(context.Background(), e.keys.Schedule(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseRecord(h)
	if err != nil || r == nil {
		t.Fatalf("record %s: %v", name, err)
	}
	return r
}

func TestScheduleTriggerListDelete(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	e := b.engs[0]
	for _, n := range []string{"c", "a", "b"} {
		b.put(everySecond(n))
	}
	if err := e.PauseSchedule(b.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	id, err := e.TriggerSchedule(b.ctx, "b")
	if err != nil || !strings.HasPrefix(id, "sched/b/now-") {
		t.Fatalf("trigger: %q %v", id, err)
	}
	if ids, _ := b.drain(); !slices.Equal(ids, []string{id}) {
		t.Errorf("triggered %v", ids)
	}
	if in := b.get("b"); in.Fired != 0 || !in.Paused {
		t.Errorf("a trigger changed the schedule: %+v", in)
	}
	page, err := e.ListSchedules(b.ctx, "", 2)
	if err != nil || len(page) != 2 || page[0].Name != "a" || page[1].Name != "b" || !page[1].Paused {
		t.Fatalf("page 1: %+v %v", page, err)
	}
	page, err = e.ListSchedules(b.ctx, "b", 2)
	if err != nil || len(page) != 1 || page[0].Name != "c" || string(page[0].Task.Payload) != "v1" {
		t.Fatalf("page 2: %+v %v", page, err)
	}
	if ok, err := e.DeleteSchedule(b.ctx, "a"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := e.DeleteSchedule(b.ctx, "a"); ok || err != nil {
		t.Fatalf("delete again: %v %v", ok, err)
	}
	b.at(time.Second)
	fired := b.fire()
	if len(fired) != 1 || fired[0].Schedule != "c" {
		t.Errorf("fired %+v, want c's tick only", fired)
	}
	if _, err := e.TriggerSchedule(b.ctx, "a"); !errors.Is(err, ErrScheduleNotFound) {
		t.Errorf("trigger a deleted schedule: %v", err)
	}
	if _, err := e.GetSchedule(b.ctx, "a"); !errors.Is(err, ErrScheduleNotFound) {
		t.Errorf("get a deleted schedule: %v", err)
	}
}

// shards returns the engines of a queue "q" of n shards on b's Redis, and two partitions in
// different shards.
func (b *schedBundle) shards(n int) (engs []*Engine, p1, p2 partition.Key) {
	b.t.Helper()
	engs = make([]*Engine, n)
	for i := range engs {
		var err error
		if engs[i], err = New(b.engs[0].client, Config{Queue: ShardQueue("q", n, i)}); err != nil {
			b.t.Fatal(err)
		}
	}
	for i := 0; p2 == ""; i++ {
		p := partition.Key(strconv.Itoa(i))
		switch {
		case p1 == "":
			p1 = p
		case ShardOf(p, n) != ShardOf(p1, n):
			p2 = p
		}
	}
	return engs, p1, p2
}

// TestScheduleShards: a schedule lives in the shard of its task's partition; a put that moves it
// (a new partition) deletes it from the old shard, and its ticks go on without a repeat.
func TestScheduleShards(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	engs, p1, p2 := b.shards(4)
	def := ScheduleDef{Name: "s", ScheduleTiming: ScheduleTiming{Every: time.Second}, Task: &Message{Partition: p1}}
	if _, err := PutScheduleIn(b.ctx, engs, engs[ShardOf(p1, 4)], &def); err != nil {
		t.Fatal(err)
	}
	b.at(time.Second)
	if res, err := engs[ShardOf(p1, 4)].FireSchedules(b.ctx, 10); err != nil || len(res.Fired) != 1 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	def.Task.Partition = p2
	home := engs[ShardOf(p2, 4)]
	in, err := PutScheduleIn(b.ctx, engs, home, &def)
	if err != nil || in.Shard != home || !in.Next.Equal(schedBase.Add(2*time.Second)) {
		t.Fatalf("move: %+v %v", in, err)
	}
	found, err := FindSchedule(b.ctx, engs, "s")
	if err != nil || found.Shard != home {
		t.Fatalf("find: %+v %v", found, err)
	}
	all, err := ListSchedulesIn(b.ctx, engs, "", 10)
	if err != nil || len(all) != 1 {
		t.Fatalf("list: %+v %v", all, err)
	}
	if ok, err := DeleteScheduleIn(b.ctx, engs, "s"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := FindSchedule(b.ctx, engs, "s"); !errors.Is(err, ErrScheduleNotFound) {
		t.Errorf("find after delete: %v", err)
	}
}

// TestFireAfterNoScript: the server lost its scripts (a restart, SCRIPT FLUSH) or its function
// library (FUNCTION FLUSH); the transaction that fires a tick runs the record's update but not the
// publish, which the firing then sends again: the tick is published once, on either script path.
func TestFireAfterNoScript(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode  ScriptMode
		flush func(context.Context, *redis.Client) error
	}{
		{ScriptsEval, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() }},
		{ScriptsFunction, func(ctx context.Context, c *redis.Client) error { return c.FunctionFlush(ctx).Err() }},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartReal(t, "a flush of the scripts of a server of its own")
			c := srv.Client(t)
			e, err := New(c, Config{Queue: redistest.Queue(t), Scripts: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := e.PutSchedule(ctx, &ScheduleDef{Name: "s", ScheduleTiming: ScheduleTiming{Every: time.Second}, Task: &Message{}}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			var fired []FiredTick
			for len(fired) == 0 && time.Now().Before(deadline) {
				if err := tc.flush(ctx, c); err != nil {
					t.Fatal(err)
				}
				res, err := e.FireSchedules(ctx, 10)
				if err != nil {
					t.Fatal(err)
				}
				fired = res.Fired
				if len(fired) == 0 {
					time.Sleep(min(res.Wait, time.Second) + time.Millisecond) // the next tick, by the server's clock
				}
			}
			if len(fired) != 1 {
				t.Fatalf("fired %v", fired)
			}
			n, err := c.Exists(ctx, e.keys.Task(fired[0].ID)).Result()
			if err != nil || n != 1 {
				t.Errorf("tick %s: task exists %d (%v)", fired[0].ID, n, err)
			}
		})
	}
}

// TestScheduleMoveLeavesAClaimedFlowTick: a flow tick claimed and not yet published when its
// schedule moves to another shard is left to the process that claimed it (docs/schedules.md): the
// moved record holds no claim for another process to take over, and its last tick is past it, so
// it never publishes the tick itself.
func TestScheduleMoveLeavesAClaimedFlowTick(t *testing.T) {
	t.Parallel()
	b := newSchedBundle(t, 1)
	engs, p1, p2 := b.shards(2)
	from, to := engs[ShardOf(p1, 2)], engs[ShardOf(p2, 2)]
	def := ScheduleDef{Name: "s", ScheduleTiming: ScheduleTiming{Every: time.Second}, Task: &Message{Partition: p1}}
	if _, err := PutScheduleIn(b.ctx, engs, from, &def); err != nil {
		t.Fatal(err)
	}
	// A claim of the tick 5 s in, as a firing of a flow schedule writes it, not yet published.
	claimed := schedBase.Add(5 * time.Second).UnixMilli()
	if err := b.engs[0].client.HSet(b.ctx, from.Keys().Schedule("s"), "fp", fmt.Sprintf("[%d]", claimed),
		"fa", schedBase.Add(5*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	b.at(6 * time.Second)
	def.Task.Partition = p2
	if _, err := PutScheduleIn(b.ctx, engs, to, &def); err != nil {
		t.Fatal(err)
	}
	rec, err := b.engs[0].client.HGetAll(b.ctx, to.Keys().Schedule("s")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rec["fp"]; ok {
		t.Errorf("the moved record holds the claim %q: another process would take it over", rec["fp"])
	}
	if last, _ := strconv.ParseInt(rec["l"], 10, 64); last < claimed {
		t.Errorf("the moved record's last tick is %s, before the claimed tick %d: it would publish it again", rec["l"], claimed)
	}
}
