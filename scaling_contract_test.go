package srq_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// The promises of docs/scaling.md and docs/deploying.md, and of the godoc they lean on
// (QueueConfig.Name, Event.Cursor, Queue.Events, WorkerConfig.ShutdownTimeout, Worker.Run,
// ErrShutdown).

// scPartitionOn returns a partition name of q's shard shard, other than those in not.
func scPartitionOn[T any](t *testing.T, q *srq.Queue[T], shard int, not ...string) string {
	t.Helper()
	for i := 0; i < 100_000; i++ {
		name := fmt.Sprintf("sc%d", i)
		if q.ShardOf(partition.Key(name)) == q.Shards()[shard] && !slices.Contains(not, name) {
			return name
		}
	}
	t.Fatalf("no partition of shard %d", shard)
	return ""
}

// TestShardedBatchWithOwnIDsPublishedAgain: across shards a batch is not atomic; when one shard's
// part is refused, the others' may have been written, and messages with ids of their own can be
// published again: the written part is reported as duplicates, not written twice, and the rest is
// written (docs/scaling.md, "Shards").
func TestShardedBatchWithOwnIDsPublishedAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 2})
	full, other := scPartitionOn(t, q, 0), scPartitionOn(t, q, 1)
	// full gets pending tasks at every priority level it may have, so that a task of one more
	// level is refused by its shard, in Redis, after the batch passed the checks made before.
	var levels []string
	for p := 1; p <= srq.MaxPriorityLevels; p++ {
		r, err := q.Publish(ctx, p, &srq.PublishOpts{Partition: full, Priority: p})
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, r.ID)
	}
	// The shards' parts go at once, and a refused part may stop the other before it is sent: the
	// batch is tried, with new ids, until the other part was written.
	var batch []srq.Message[int]
	for k := 0; ; k++ {
		if k == 200 {
			t.Fatal("in 200 tries, shard 1's part of a batch whose part for shard 0 was refused was never written")
		}
		batch = []srq.Message[int]{
			{Value: 1, Opts: srq.PublishOpts{ID: fmt.Sprint("own-other-", k), Partition: other}},
			{Value: 2, Opts: srq.PublishOpts{ID: fmt.Sprint("own-full-", k), Partition: full, Priority: srq.MaxPriorityLevels + 1}},
		}
		if _, err := q.PublishBatch(ctx, batch); !errors.Is(err, srq.ErrTooManyPriorities) {
			t.Fatalf("a batch whose part for shard 0 brings one level too many: %v, want ErrTooManyPriorities", err)
		}
		_, err := q.Shards()[1].Task(ctx, batch[0].Opts.ID)
		if err == nil {
			break
		}
		if !errors.Is(err, srq.ErrNotFound) {
			t.Fatal(err)
		}
	}
	// Room for the refused message's level, then the same batch again.
	if err := q.Cancel(ctx, levels[0]); err != nil {
		t.Fatal(err)
	}
	res, err := q.PublishBatch(ctx, batch)
	if err != nil {
		t.Fatalf("the same batch again: %v", err)
	}
	if !res[0].Duplicate || res[0].ID != batch[0].Opts.ID {
		t.Errorf("the message the failed batch wrote, published again: %+v, want a duplicate", res[0])
	}
	if res[1].Duplicate || res[1].ID != batch[1].Opts.ID {
		t.Errorf("the message the failed batch did not write, published again: %+v, want written", res[1])
	}
	if st, err := q.Shards()[1].Stats(ctx); err != nil || st.Pending != 1 || st.Published != 1 {
		t.Errorf("shard 1 after the batch was published again: pending %d, published %d (%v); want 1 and 1: written once",
			st.Pending, st.Published, err)
	}
	if ti, err := q.Shards()[0].Task(ctx, batch[1].Opts.ID); err != nil || ti.Partition != partition.Key(full) {
		t.Errorf("the refused message, published again: %+v, %v", ti, err)
	}
}

// TestTaskIDsUniquePerShard: an id is a duplicate only within the shard its partition maps to: one
// id published to partitions of two shards writes two tasks, neither a duplicate; published again
// to a partition of one of those shards, it is a duplicate (docs/scaling.md, "Shards").
func TestTaskIDsUniquePerShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 2})
	p0, p1 := scPartitionOn(t, q, 0), scPartitionOn(t, q, 1)
	p0b := scPartitionOn(t, q, 0, p0)

	for i, p := range []string{p0, p1} {
		r, err := q.Publish(ctx, i, &srq.PublishOpts{ID: "same", Partition: p})
		if err != nil || r.Duplicate {
			t.Fatalf("id same to a partition of shard %d: %+v, %v; want written", i, r, err)
		}
	}
	res, err := q.PublishBatch(ctx, []srq.Message[int]{
		{Value: 10, Opts: srq.PublishOpts{ID: "batched", Partition: p0}},
		{Value: 11, Opts: srq.PublishOpts{ID: "batched", Partition: p1}},
	})
	if err != nil || res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("one id to both shards in one batch: %+v, %v; want both written", res, err)
	}
	for i, p := range []string{p0, p1} {
		for _, id := range []string{"same", "batched"} {
			ti, err := q.Shards()[i].Task(ctx, id)
			if err != nil || ti.Partition != partition.Key(p) {
				t.Errorf("task %s of shard %d: %+v, %v; want the one of partition %s", id, i, ti, err, p)
			}
		}
	}
	for _, p := range []string{p0b, p1} {
		r, err := q.Publish(ctx, 99, &srq.PublishOpts{ID: "same", Partition: p})
		if err != nil || !r.Duplicate {
			t.Errorf("id same again, to partition %s of a shard that has it: %+v, %v; want a duplicate", p, r, err)
		}
	}
	if st, err := q.Stats(ctx); err != nil || st.Pending != 4 || st.Duplicates != 2 {
		t.Errorf("stats: pending %d, duplicates %d (%v); want 4 and 2", st.Pending, st.Duplicates, err)
	}
}

// TestCorruptShardCountRefusedByRegisteringCalls: a stored shard count that is not a number from 1
// to engine.MaxShards is refused with ErrInvalid by the calls that register the queue, and by
// them only: Publish, PublishBatch, PublishFlow, Schedule, ScheduleFlow, DeadLetters, Requeue,
// Purge, a Worker's Run and RunOnce; the other calls use the configured count. A Queue checks it
// until one of those calls registered the queue (docs/scaling.md, "Choosing N"; Run's godoc and
// docs/deploying.md for Run).
func TestCorruptShardCountRefusedByRegisteringCalls(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Client(t)
	registry := engine.RegistryKey(engine.DefaultPrefix)

	for _, bad := range []string{"abc", "0", fmt.Sprint(engine.MaxShards + 1)} {
		t.Run(bad, func(t *testing.T) {
			name := redistest.Queue(t)
			if err := c.HSet(ctx, registry, name, bad).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.HDel(context.Background(), registry, name) })
			q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, srq.ErrInvalid) {
					t.Errorf("%s with the stored count %q: %v, want ErrInvalid", what, bad, err)
				}
			}
			_, err = q.Publish(ctx, 1, nil)
			refused("Publish", err)
			_, err = q.PublishBatch(ctx, []srq.Message[int]{{Value: 1}})
			refused("PublishBatch", err)
			_, err = srq.PublishFlow(ctx, &srq.Flow{Steps: []*srq.Step{q.Step("a", 1, nil)}})
			refused("PublishFlow", err)
			_, err = q.Schedule(ctx, "s", 1, &srq.ScheduleOpts{Every: time.Hour})
			refused("Schedule", err)
			_, err = q.ScheduleFlow(ctx, "sf", &srq.Flow{Steps: []*srq.Step{q.Step("a", 1, nil)}}, &srq.ScheduleOpts{Every: time.Hour})
			refused("ScheduleFlow", err)
			_, err = q.DeadLetters(ctx, srq.DeadQuery{})
			refused("DeadLetters", err)
			_, err = q.Requeue(ctx, "x")
			refused("Requeue", err)
			_, err = q.Purge(ctx, "x")
			refused("Purge", err)

			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
				srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			refused("Run", w.Run(rctx)) // at once: a ctx that ended would make it return nil
			if rctx.Err() != nil {
				t.Error("Run waited for its context instead of failing")
			}
			_, err = w.RunOnce(ctx)
			refused("RunOnce", err)

			// The other calls use the configured count.
			if st, err := q.Stats(ctx); err != nil || st.Published != 0 {
				t.Errorf("Stats: %+v, %v; want no error and nothing published", st, err)
			}
			if err := q.Cancel(ctx, "x"); !errors.Is(err, srq.ErrNotFound) {
				t.Errorf("Cancel of an unknown task: %v, want ErrNotFound", err)
			}
			if v, err := c.HGet(ctx, registry, name).Result(); err != nil || v != bad {
				t.Errorf("the stored count is %q (%v), want %q left as it was", v, err, bad)
			}
		})
	}

	t.Run("after-registration", func(t *testing.T) {
		q, _ := newQueue[int](t, srq.QueueConfig{})
		if _, err := q.Publish(ctx, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(ctx, registry, q.Name(), "abc").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.HDel(context.Background(), registry, q.Name()) })
		if _, err := q.Publish(ctx, 2, nil); err != nil {
			t.Errorf("Publish of a Queue that registered before the count was corrupted: %v, want nil", err)
		}
		again, err := srq.NewQueue[int](c, srq.QueueConfig{Name: q.Name()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := again.Publish(ctx, 3, nil); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Publish of a new Queue of it: %v, want ErrInvalid", err)
		}
	})
}

// TestRunFailsOnlyForAWorkerItCannotStart: Run's errors are ErrRunning, ErrShardCount, and
// ErrInvalid for a nil or zero Worker (the corrupt count is in
// TestCorruptShardCountRefusedByRegisteringCalls) (docs/deploying.md, "The main of a worker").
func TestRunFailsOnlyForAWorkerItCannotStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var nilWorker *srq.Worker
	if err := nilWorker.Run(ctx); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("Run of a nil Worker: %v, want ErrInvalid", err)
	}
	if err := new(srq.Worker).Run(ctx); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("Run of a zero Worker: %v, want ErrInvalid", err)
	}

	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	if _, err := q.Publish(ctx, 1, nil); err != nil { // registers 2 shards
		t.Fatal(err)
	}
	h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
	one, err := srq.NewQueue[int](c, srq.QueueConfig{Name: q.Name()})
	if err != nil {
		t.Fatal(err)
	}
	w1, err := srq.NewWorker(one, h, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := w1.Run(ctx); !errors.Is(err, srq.ErrShardCount) {
		t.Errorf("Run on a queue registered with another shard count: %v, want ErrShardCount", err)
	}

	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "the worker to take the task", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Acked == 1
	})
	if err := w.Run(ctx); !errors.Is(err, srq.ErrRunning) {
		t.Errorf("Run of a running worker: %v, want ErrRunning", err)
	}
	stop() // fails the test if Run returns an error
}

// TestShutdownTimeoutSettlesByTheHandlersResult: at the shutdown timeout the running handlers'
// contexts end with cause ErrShutdown; a task whose handler then returns an error goes back
// without an attempt used, whatever the error, except a Permanent one, which dead-letters it; a
// handler that then returns nil has its task acked (docs/deploying.md step 3,
// WorkerConfig.ShutdownTimeout, Worker.Run, ErrShutdown).
func TestShutdownTimeoutSettlesByTheHandlersResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                             string
		ret                              error
		acked, dead, handedBack, pending int64
		wantDeadReason                   string
	}{
		{name: "nil", ret: nil, acked: 1},
		{name: "permanent", ret: srq.Permanent(errors.New("gave up at shutdown")), dead: 1, wantDeadReason: "gave up at shutdown"},
		{name: "error", ret: errors.New("cut off"), handedBack: 1, pending: 1},
		{name: "reject", ret: srq.RejectWithDelay(time.Hour, errors.New("later")), handedBack: 1, pending: 1},
		{name: "context-error", ret: context.Canceled, handedBack: 1, pending: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[int](t, srq.QueueConfig{})
			if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "t", MaxAttempts: 3}); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			var once sync.Once
			causes := make(chan error, 1)
			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
				once.Do(func() { close(started) })
				<-ctx.Done()
				select {
				case causes <- context.Cause(ctx):
				default:
				}
				return tc.ret
			}), srq.WorkerConfig{ShutdownTimeout: 50 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			<-started
			stop()
			if cause := <-causes; !errors.Is(cause, srq.ErrShutdown) {
				t.Errorf("the handler's context ended with cause %v, want ErrShutdown", cause)
			}
			st, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Acked != tc.acked || st.Dead != tc.dead || st.HandedBack != tc.handedBack || st.Pending != tc.pending ||
				st.Rejected != 0 {
				t.Errorf("after a %s returned at the shutdown timeout: acked %d, dead %d, handed back %d, pending %d, rejected %d; want %d, %d, %d, %d, 0",
					tc.name, st.Acked, st.Dead, st.HandedBack, st.Pending, st.Rejected, tc.acked, tc.dead, tc.handedBack, tc.pending)
			}
			switch {
			case tc.pending == 1:
				ti, err := q.Shards()[0].Task(ctx, "t")
				if err != nil || ti.State != engine.StatePending || ti.Attempts != 0 || !ti.AvailableAt.Before(time.Now().Add(time.Minute)) {
					t.Errorf("the task handed back: %+v, %v; want pending now with no attempt used", ti, err)
				}
			case tc.dead == 1:
				page, err := q.DeadLetters(ctx, srq.DeadQuery{})
				if err != nil || len(page.Letters) != 1 || !strings.Contains(page.Letters[0].Error, tc.wantDeadReason) {
					t.Errorf("dead letters: %+v, %v; want the task, with %q", page, err, tc.wantDeadReason)
				}
			}
		})
	}
}

// scStreamID is what every position of an event cursor is.
var scStreamID = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// TestShardedEventsCursorResumes: on a sharded queue, an event's Cursor holds a stream id per
// shard, and Events from it yields the events that follow it on every shard, none before: read
// from "" and from "0" (Event.Cursor, Queue.Events).
func TestShardedEventsCursorResumes(t *testing.T) {
	t.Parallel()
	t.Run("from-now", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[int](t, srq.QueueConfig{Shards: 2, Events: 10_000})
		p0, p1 := scPartitionOn(t, q, 0), scPartitionOn(t, q, 1)
		// Registers the queue; its event on shard 1 is older than the reading, which skips it.
		if _, err := q.Publish(ctx, 0, &srq.PublishOpts{ID: "before", Partition: p1}); err != nil {
			t.Fatal(err)
		}
		// Tasks to shard 0, one at a time, until the reader has its first event: that event comes
		// from shard 0 while shard 1 has had nothing to read since the reading started.
		got := make(chan struct{})
		done := make(chan struct{})
		published := 0
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				if _, err := q.Publish(ctx, i, &srq.PublishOpts{ID: fmt.Sprint("tick-", i), Partition: p0}); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				published = i + 1
				select {
				case <-got:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var first srq.Event
		for ev, err := range q.Events(rctx, "") {
			if err != nil {
				t.Fatalf("Events from \"\": %v", err)
			}
			first = ev
			break
		}
		cancel()
		close(got)
		<-done
		if first.Kind != engine.EventPublished || first.Shard != 0 || !strings.HasPrefix(first.ID, "tick-") {
			t.Fatalf("first event: %+v, want a tick's publish on shard 0", first)
		}
		scCheckCursor(t, first.Cursor, 2)
		var n int
		if _, err := fmt.Sscanf(first.ID, "tick-%d", &n); err != nil {
			t.Fatal(err)
		}

		for i, p := range []string{p0, p1} {
			if _, err := q.Publish(ctx, 100+i, &srq.PublishOpts{ID: fmt.Sprint("after-", i), Partition: p}); err != nil {
				t.Fatal(err)
			}
		}
		var want0 []string
		for i := n + 1; i < published; i++ {
			want0 = append(want0, fmt.Sprint("tick-", i))
		}
		want0 = append(want0, "after-0")
		got0, got1 := scReadUntil(t, ctx, q, first.Cursor, "after-0", "after-1")
		if !slices.Equal(got0, want0) || !slices.Equal(got1, []string{"after-1"}) {
			t.Errorf("resumed from the cursor %q of %s: shard 0 %v, shard 1 %v; want %v and [after-1]",
				first.Cursor, first.ID, got0, got1, want0)
		}
	})

	t.Run("from-the-oldest", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[int](t, srq.QueueConfig{Shards: 2, Events: 1000})
		p0, p1 := scPartitionOn(t, q, 0), scPartitionOn(t, q, 1)
		for i, p := range []string{p0, p1} {
			if _, err := q.Publish(ctx, i, &srq.PublishOpts{ID: fmt.Sprint("a-", i), Partition: p}); err != nil {
				t.Fatal(err)
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var first srq.Event
		for ev, err := range q.Events(rctx, "0") {
			if err != nil {
				t.Fatalf("Events from \"0\": %v", err)
			}
			first = ev
			break
		}
		cancel()
		scCheckCursor(t, first.Cursor, 2)
		rest := map[string]string{"a-0": "a-1", "a-1": "a-0"}[first.ID]
		if rest == "" {
			t.Fatalf("first event: %+v", first)
		}
		if _, err := q.Publish(ctx, 9, &srq.PublishOpts{ID: "b", Partition: p0}); err != nil {
			t.Fatal(err)
		}
		got0, got1 := scReadUntil(t, ctx, q, first.Cursor, rest, "b")
		all := append(got0, got1...)
		slices.Sort(all)
		if want := []string{rest, "b"}; !slices.Equal(all, want) {
			t.Errorf("resumed from the cursor %q of %s: %v, want %v", first.Cursor, first.ID, all, want)
		}
	})
}

// scCheckCursor checks that cursor is n stream ids joined by commas.
func scCheckCursor(t *testing.T, cursor string, n int) {
	t.Helper()
	parts := strings.Split(cursor, ",")
	if len(parts) != n {
		t.Fatalf("cursor %q has %d positions, want %d", cursor, len(parts), n)
	}
	for _, p := range parts {
		if !scStreamID.MatchString(p) {
			t.Fatalf("cursor %q: position %q is not a stream id", cursor, p)
		}
	}
}

// scReadUntil reads q's publish events from cursor until it has seen every id of ids, and returns
// the ids of the tasks published on shard 0 and on shard 1, in the order read.
func scReadUntil(t *testing.T, ctx context.Context, q *srq.Queue[int], cursor string, ids ...string) (shard0, shard1 []string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	for ev, err := range q.Events(rctx, cursor) {
		if err != nil {
			t.Fatalf("Events from the cursor %q: %v", cursor, err)
		}
		if ev.Kind != engine.EventPublished {
			continue
		}
		if ev.Shard == 0 {
			shard0 = append(shard0, ev.ID)
		} else {
			shard1 = append(shard1, ev.ID)
		}
		delete(left, ev.ID)
		if len(left) == 0 {
			return shard0, shard1
		}
	}
	t.Fatalf("from the cursor %q: shard 0 %v, shard 1 %v, never %v", cursor, shard0, shard1, left)
	return nil, nil
}

// TestQueueNameLimitWithShards: a queue's name has at most 200 bytes on one shard; on a sharded
// queue each shard's name, engine.ShardQueue(name, Shards, i), must fit those 200 bytes, which
// leaves the name 196 bytes with 2 to 4 shards; one byte more is refused with ErrInvalid
// (QueueConfig.Name).
func TestQueueNameLimitWithShards(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Client(t)
	for shards := 1; shards <= 4; shards++ {
		base := fmt.Sprintf("%s-%d-", redistest.Queue(t), shards) // a queue of its own
		named := func(n int) string { return base + strings.Repeat("n", n-len(base)) }
		// The longest name whose shard names all fit, as engine.ShardQueue names them.
		longest := 0
		for n := len(base) + 1; n <= engine.MaxNameLen; n++ {
			fits := true
			for i := 0; i < shards; i++ {
				fits = fits && len(engine.ShardQueue(named(n), shards, i)) <= engine.MaxNameLen
			}
			if fits {
				longest = n
			}
		}
		want := 196
		if shards == 1 {
			want = engine.MaxNameLen
		}
		if longest != want {
			t.Errorf("%d shards: the longest name that fits has %d bytes, the godoc says %d", shards, longest, want)
		}
		q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: named(longest), Shards: shards})
		if err != nil {
			t.Fatalf("%d shards, a name of %d bytes: %v", shards, longest, err)
		}
		if _, err := q.Publish(ctx, 1, nil); err != nil {
			t.Errorf("%d shards, a name of %d bytes: Publish: %v", shards, longest, err)
		}
		_, err = srq.NewQueue[int](c, srq.QueueConfig{Name: named(longest + 1), Shards: shards})
		if !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%d shards, a name of %d bytes: %v, want ErrInvalid", shards, longest+1, err)
		}
	}
}
