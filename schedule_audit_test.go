package srq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TestScheduleMoveBetweenShardsKeepsState: on a sharded queue, an update that changes the
// partition moves the schedule to another shard and keeps its state: still paused, the same
// counters, last tick and creation time. Resumed, it goes on after its last tick, in its new shard.
func TestScheduleMoveBetweenShardsKeepsState(t *testing.T) {
	t.Parallel()
	q, c := newQueue[string](t, srq.QueueConfig{Shards: 4})
	ctx := testCtx(t)
	// Unordered, a partition's key is its name.
	from, to := "p-0", "p-0"
	for i := 1; q.ShardOf(partition.Key(to)) == q.ShardOf(partition.Key(from)); i++ {
		to = fmt.Sprintf("p-%d", i)
	}
	if _, err := q.Schedule(ctx, "mover", "v", &srq.ScheduleOpts{Every: time.Second,
		Publish: srq.PublishOpts{Partition: from}}); err != nil {
		t.Fatal(err)
	}
	s, err := srq.NewScheduler(c, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fireUntil(t, ctx, s, "mover")
	if err := q.PauseSchedule(ctx, "mover"); err != nil {
		t.Fatal(err)
	}
	before, err := q.GetSchedule(ctx, "mover")
	if err != nil {
		t.Fatal(err)
	}
	if !before.Paused || before.Fired < 1 || before.Shard != q.ShardOf(partition.Key(from)) {
		t.Fatalf("before the move: %+v", before)
	}
	put, err := q.Schedule(ctx, "mover", "w", &srq.ScheduleOpts{Every: time.Second,
		Publish: srq.PublishOpts{Partition: to}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []srq.ScheduleInfo{put, mustGetSchedule(t, q, "mover")} {
		if in.Shard != q.ShardOf(partition.Key(to)) {
			t.Errorf("the schedule is in %v, want the shard of %q", in.Shard.Config().Queue, to)
		}
		if !in.Paused || !in.Next.IsZero() {
			t.Errorf("moved: paused %v, next %v; want paused", in.Paused, in.Next)
		}
		if in.Fired != before.Fired || in.Missed != before.Missed || !in.LastTick.Equal(before.LastTick) ||
			!in.LastFired.Equal(before.LastFired) || !in.Created.Equal(before.Created) {
			t.Errorf("moved: fired %d missed %d last %v (%v) created %v; before: fired %d missed %d last %v (%v) created %v",
				in.Fired, in.Missed, in.LastTick, in.LastFired, in.Created,
				before.Fired, before.Missed, before.LastTick, before.LastFired, before.Created)
		}
	}
	if in, err := q.ShardOf(partition.Key(from)).GetSchedule(ctx, "mover"); !errors.Is(err, srq.ErrScheduleNotFound) {
		t.Errorf("the old shard still holds the schedule: %+v %v", in, err)
	}
	if list, err := q.Schedules(ctx, "", 10); err != nil || len(list) != 1 || !list[0].Paused {
		t.Errorf("list: %+v %v", list, err)
	}
	// A paused schedule fires nothing, in its new shard as in its old.
	if f, err := s.Fire(ctx); err != nil || len(f) != 0 {
		t.Errorf("a paused schedule fired %+v %v", f, err)
	}
	if err := q.ResumeSchedule(ctx, "mover"); err != nil {
		t.Fatal(err)
	}
	fired := fireUntil(t, ctx, s, "mover")
	for _, f := range fired {
		if !f.Tick.After(before.LastTick) {
			t.Errorf("tick %v fired again after the move (last tick %v)", f.Tick, before.LastTick)
		}
		if _, err := q.ShardOf(partition.Key(to)).Task(ctx, f.ID); err != nil {
			t.Errorf("tick %s is not in the new shard: %v", f.ID, err)
		}
	}
	after := mustGetSchedule(t, q, "mover")
	if after.Fired != before.Fired+int64(len(fired)) {
		t.Errorf("fired %d after %d more ticks; was %d", after.Fired, len(fired), before.Fired)
	}
}

func mustGetSchedule(t *testing.T, q *srq.Queue[string], name string) srq.ScheduleInfo {
	t.Helper()
	in, err := q.GetSchedule(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestSchedulerTickWritesPublishedEvent: a tick fired by a Scheduler, which is given only the
// queue's name, writes its task's published event to the stream of a queue that keeps events.
func TestSchedulerTickWritesPublishedEvent(t *testing.T) {
	t.Parallel()
	q, c := newQueue[string](t, srq.QueueConfig{Events: 100, Shards: 2})
	ctx := testCtx(t)
	if _, err := q.Schedule(ctx, "evented", "v", &srq.ScheduleOpts{Every: time.Second,
		Publish: srq.PublishOpts{Partition: "acct"}}); err != nil {
		t.Fatal(err)
	}
	s, err := srq.NewScheduler(c, srq.SchedulerConfig{Queues: []string{q.Name()}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	fired := fireUntil(t, ctx, s, "evented")
	evs, err := q.ShardOf("acct").Events(ctx, "0", engine.MaxEventsRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fired {
		found := false
		for _, ev := range evs {
			if ev.ID == f.ID && ev.Kind == engine.EventPublished {
				found = true
			}
		}
		if !found {
			t.Errorf("tick %s has no published event; events: %+v", f.ID, evs)
		}
	}
}

// TestScheduleFlowRefusesMiddleware: ScheduleFlow refuses a flow with Middleware, with
// ErrInvalid, and stores nothing.
func TestScheduleFlowRefusesMiddleware(t *testing.T) {
	t.Parallel()
	q, c := newQueue[string](t, srq.QueueConfig{})
	ctx := testCtx(t)
	mw := func(next srq.FlowPublishFunc) srq.FlowPublishFunc { return next }
	f := &srq.Flow{Steps: []*srq.Step{q.Step("a", "v", nil)}, Middleware: []srq.FlowMiddleware{mw}}
	_, err := q.ScheduleFlow(ctx, "mw", f, &srq.ScheduleOpts{Every: time.Second})
	if !errors.Is(err, srq.ErrInvalid) || !strings.Contains(err.Error(), "Middleware") {
		t.Fatalf("ScheduleFlow with Middleware: %v, want ErrInvalid naming Middleware", err)
	}
	if _, err := q.GetSchedule(ctx, "mw"); !errors.Is(err, srq.ErrScheduleNotFound) {
		t.Errorf("GetSchedule after the refusal: %v", err)
	}
	keys, _, err := c.Scan(ctx, 0, "srq:{"+q.Name()+"}*", 100).Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys of the queue: %v %v", keys, err)
	}
	// The same flow without Middleware is accepted.
	f.Middleware = nil
	if _, err := q.ScheduleFlow(ctx, "mw", f, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Errorf("ScheduleFlow without Middleware: %v", err)
	}
}
