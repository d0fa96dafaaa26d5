package srq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// partitionsOfShards returns one unordered partition name for each of the shards of a queue of n
// shards.
func partitionsOfShards(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	found := 0
	for i := 0; found < n && i < 10_000; i++ {
		name := fmt.Sprintf("p%d", i)
		if k := engine.ShardOf(partition.Key(name), n); out[k] == "" {
			out[k] = name
			found++
		}
	}
	if found < n {
		t.Fatalf("no partition for every one of %d shards", n)
	}
	return out
}

// taskExists says whether a task with id is in one of q's shards.
func taskExists[T any](t *testing.T, ctx context.Context, q *srq.Queue[T], id string) bool {
	t.Helper()
	for _, eng := range q.Shards() {
		_, err := eng.Task(ctx, id)
		if err == nil {
			return true
		}
		if !errors.Is(err, srq.ErrNotFound) {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	return false
}

// TestPublishBatchChecksWholeThenPerShard: what PublishBatch checks without Redis it checks for
// the whole batch, and a batch refused then writes nothing on any shard: an invalid message, a
// batch that alone gives a partition more than MaxPriorityLevels levels, a shard's part of more
// than engine.MaxBatch messages. Whether the partition's pending tasks leave room for the batch's
// levels each shard finds out for its part, which it writes whole or not at all: a queue of one
// shard writes nothing of a batch refused for it, a sharded queue may have written the other
// shards' parts, and publishing the batch again reports those as duplicates
// (docs/getting-started.md, "Publishing").
func TestPublishBatchChecksWholeThenPerShard(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards-%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, c := newQueue[int](t, srq.QueueConfig{Shards: shards})
			parts := partitionsOfShards(t, max(shards, 2)) // two partitions, on two shards when there are
			full, other := parts[0], parts[1]
			refusedWhole := func(what string, msgs []srq.Message[int], want error) {
				t.Helper()
				if _, err := q.PublishBatch(ctx, msgs); !errors.Is(err, want) || !errors.Is(err, srq.ErrInvalid) {
					t.Fatalf("%s: %v, want %v (and ErrInvalid)", what, err, want)
				}
				if st, err := q.Stats(ctx); err != nil || st.Published != 0 {
					t.Fatalf("%s: stats %+v, %v: the refused batch wrote tasks", what, st, err)
				}
				if _, err := engine.QueueShards(ctx, c, engine.DefaultPrefix, q.Name()); !errors.Is(err, engine.ErrQueueNotFound) {
					t.Fatalf("%s: the queue is registered after a refused batch: %v", what, err)
				}
			}

			var levels []srq.Message[int]
			levels = append(levels, srq.Message[int]{Value: -1, Opts: srq.PublishOpts{Partition: other}})
			for p := 1; p <= srq.MaxPriorityLevels+1; p++ {
				levels = append(levels, srq.Message[int]{Value: p, Opts: srq.PublishOpts{Partition: full, Priority: p}})
			}
			refusedWhole("a batch of 17 levels for one partition", levels, srq.ErrTooManyPriorities)

			big := make([]srq.Message[int], engine.MaxBatch+1, engine.MaxBatch+2)
			for i := range big {
				big[i] = srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: full}}
			}
			big = append(big, srq.Message[int]{Value: -1, Opts: srq.PublishOpts{Partition: other}})
			refusedWhole("a shard's part over MaxBatch", big, srq.ErrInvalid)

			// The partition full gets pending tasks at every level it may have; then a batch whose
			// message for full brings one more level is refused by full's shard, in Redis.
			if _, err := q.PublishBatch(ctx, levels[1:srq.MaxPriorityLevels+1]); err != nil {
				t.Fatal(err)
			}
			batch := []srq.Message[int]{
				{Value: 1, Opts: srq.PublishOpts{ID: "other-shard", Partition: other}},
				{Value: 2, Opts: srq.PublishOpts{ID: "full-level-0", Partition: full}},
				{Value: 3, Opts: srq.PublishOpts{ID: "full-new-level", Partition: full, Priority: srq.MaxPriorityLevels + 1}},
			}
			_, err := q.PublishBatch(ctx, batch)
			if !errors.Is(err, srq.ErrTooManyPriorities) || !errors.Is(err, srq.ErrInvalid) {
				t.Fatalf("a batch past the levels pending: %v, want ErrTooManyPriorities (and ErrInvalid)", err)
			}
			for _, id := range []string{"full-level-0", "full-new-level"} {
				if taskExists(t, ctx, q, id) {
					t.Errorf("task %s was written: its shard's part of the refused batch is not all-or-nothing", id)
				}
			}
			written := taskExists(t, ctx, q, "other-shard")
			if shards == 1 && written {
				t.Error("on a queue of one shard the refused batch wrote the message of another partition")
			}
			res, err := q.PublishBatch(ctx, batch[:1])
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Duplicate != written {
				t.Errorf("published again, the message the refused batch wrote (%v) is a duplicate: %v", written, res[0].Duplicate)
			}
		})
	}
}

// TestRequeueAndPurgeSkipWhatIsNotDead: Queue.Requeue and Queue.Purge return no error for ids
// that are unknown or not dead letters: they leave them alone and count only the letters they
// moved or deleted. engine.Engine.Requeue reports ErrNotDead and ErrNotFound per id
// (docs/errors.md, "Errors srq's calls return").
func TestRequeueAndPurgeSkipWhatIsNotDead(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards-%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[string](t, srq.QueueConfig{Shards: shards})
			for _, id := range []string{"dead-1", "dead-2"} {
				if _, err := q.Publish(ctx, id, &srq.PublishOpts{ID: id, Partition: id}); err != nil {
					t.Fatal(err)
				}
			}
			w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
				return srq.Permanent(errors.New("for the dead letters"))
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := w.RunOnce(ctx); err != nil || n != 2 {
				t.Fatalf("RunOnce ran %d: %v", n, err)
			}
			if _, err := q.Publish(ctx, "pending", &srq.PublishOpts{ID: "pending"}); err != nil {
				t.Fatal(err)
			}

			if n, err := q.Requeue(ctx, "pending", "unknown", "dead-1"); err != nil || n != 1 {
				t.Fatalf("Requeue of a pending, an unknown and a dead id: %d, %v; want 1, nil", n, err)
			}
			if n, err := q.Purge(ctx, "pending", "unknown", "dead-2"); err != nil || n != 1 {
				t.Fatalf("Purge of a pending, an unknown and a dead id: %d, %v; want 1, nil", n, err)
			}
			if n, err := q.Requeue(ctx, "pending", "unknown"); err != nil || n != 0 {
				t.Fatalf("Requeue of a pending and an unknown id: %d, %v; want 0, nil", n, err)
			}
			if n, err := q.Purge(ctx, "pending", "unknown"); err != nil || n != 0 {
				t.Fatalf("Purge of a pending and an unknown id: %d, %v; want 0, nil", n, err)
			}
			for id, want := range map[string]engine.State{"pending": engine.StatePending, "dead-1": engine.StatePending} {
				var found bool
				for _, eng := range q.Shards() {
					if ti, err := eng.Task(ctx, id); err == nil {
						found = true
						if ti.State != want {
							t.Errorf("task %s is %s, want %s", id, ti.State, want)
						}
					}
				}
				if !found {
					t.Errorf("task %s is gone", id)
				}
			}
			if taskExists(t, ctx, q, "dead-2") {
				t.Error("the purged dead letter is still there")
			}

			// The engine's call answers per id.
			eng := q.Shards()[engine.ShardOf("", shards)] // the shard of "pending", published without a partition
			errs, err := eng.Requeue(ctx, []string{"pending", "unknown"})
			if err != nil || len(errs) != 2 || !errors.Is(errs[0], srq.ErrNotDead) || !errors.Is(errs[1], srq.ErrNotFound) {
				t.Fatalf("engine Requeue of a pending and an unknown id: %v, %v; want ErrNotDead, ErrNotFound", errs, err)
			}
			if n, err := eng.Purge(ctx, []string{"pending", "unknown"}); err != nil || n != 0 {
				t.Fatalf("engine Purge of a pending and an unknown id: %d, %v; want 0, nil", n, err)
			}
		})
	}
}

// ackGate is a go-redis hook that holds every ack.lua or ack_fetch.lua call carrying acks of the
// tasks it watches until it is opened, and records how many of them each call carried.
type ackGate struct {
	processHookOnly
	shas  scriptSet
	ids   map[string]bool
	open  chan struct{}
	held  chan struct{} // a call is held (buffered: the first)
	mu    sync.Mutex
	sizes []int
}

func (g *ackGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if g.shas.runs(cmd) {
			n := 0
			for _, a := range cmd.Args() {
				if s, ok := a.(string); ok && g.ids[s] {
					n++
				}
			}
			if n > 0 { // a merged fetch without acks goes through
				g.mu.Lock()
				g.sizes = append(g.sizes, n)
				g.mu.Unlock()
				select {
				case g.held <- struct{}{}:
				default:
				}
				select {
				case <-g.open:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return next(ctx, cmd)
	}
}

// TestTasksWaitingForTheirAckAreHeldBesides: a worker's Concurrency + Prefetch bounds the tasks
// running or waiting for a handler; tasks whose handler succeeded stay leased to it besides until
// their acks land, and acks no fetch takes along (here: a sharded queue) go in calls of at most
// 256 (docs/worker.md, "How the worker runs tasks" and "Throughput").
func TestTasksWaitingForTheirAckAreHeldBesides(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const tasks, concurrency, prefetch = 600, 2, 2
	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	part := partitionsOfShards(t, 2)[0]
	gate := &ackGate{shas: scriptSHAs(t, "ack", "ack_fetch"), ids: map[string]bool{},
		open: make(chan struct{}), held: make(chan struct{}, 1)}
	msgs := make([]srq.Message[int], tasks)
	for i := range msgs {
		id := fmt.Sprintf("held-%03d", i)
		gate.ids[id] = true
		msgs[i] = srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: id, Partition: part}}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	c.AddHook(gate)
	var ran atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: concurrency, Prefetch: prefetch, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	var once sync.Once
	openGate := func() { once.Do(func() { close(gate.open) }) }
	t.Cleanup(openGate) // before the worker's stop, which waits for the acks

	waitFor(t, "every handler to finish while the acks are held", func() bool { return ran.Load() == tasks })
	select {
	case <-gate.held:
	case <-ctx.Done():
		t.Fatal("no ack call was held")
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != tasks {
		t.Fatalf("%d tasks leased with every handler done and no ack landed, want %d (more than Concurrency + Prefetch = %d)",
			st.InFlight, tasks, concurrency+prefetch)
	}
	openGate()
	waitFor(t, "every task acked", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Acked == tasks && st.InFlight == 0
	})
	stop()
	gate.mu.Lock()
	defer gate.mu.Unlock()
	most, total := 0, 0
	for _, n := range gate.sizes {
		most, total = max(most, n), total+n
	}
	if most != 256 || total != tasks {
		t.Errorf("ack calls of %v acks: want each at most 256, a full one among them (hundreds were queued), %d in all",
			gate.sizes, tasks)
	}
}

// TestWorkflowWaitsUseNoAttempt: a delivery that ends with a workflow wait (WaitSignal,
// WaitChildren, Sleep) does not count as an attempt: a task of one attempt waits for each in turn
// and is then acked, every run being attempt 1 (docs/errors.md, "Attempts").
func TestWorkflowWaitsUseNoAttempt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	var mu sync.Mutex
	var runs []string
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, task *srq.Task[string]) error {
		if task.Value == "child" {
			return nil
		}
		step, _, err := srq.State[int](ctx, task.Delivery)
		if err != nil {
			return err
		}
		mu.Lock()
		runs = append(runs, fmt.Sprintf("step %d attempt %d", step, task.Attempt))
		mu.Unlock()
		if err := task.SetState(step + 1); err != nil {
			return err
		}
		switch step {
		case 0:
			return srq.WaitSignal("go", 0)
		case 1:
			if _, err := srq.Spawn(ctx, task.Delivery, q, "child", "child", nil); err != nil {
				return err
			}
			return srq.WaitChildren()
		case 2:
			return srq.Sleep(0)
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const id = "waits"
	if _, err := q.Publish(ctx, "parent", &srq.PublishOpts{ID: id, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "the task to wait for its signal", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Waiting == 1
	})
	if taken, err := q.Signal(ctx, id, "go", true); err != nil || !taken {
		t.Fatalf("signal: %v, %v", taken, err)
	}
	waitFor(t, "the task and its child to be acked", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Acked == 2
	})
	if st, err := q.Stats(ctx); err != nil || st.Dead != 0 {
		t.Fatalf("stats %+v, %v: want no dead letter", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "step 0 attempt 1, step 1 attempt 1, step 2 attempt 1, step 3 attempt 1"
	if got := strings.Join(runs, ", "); got != want {
		t.Errorf("runs %s; want %s", got, want)
	}
}
