package srq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// TestShardedQueueKeepsOrderAndSpreads: a queue split over 4 shards spreads its partitions over
// every shard, a worker serves them all, and every ordered partition still runs in order, one
// task at a time.
func TestShardedQueueKeepsOrderAndSpreads(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const shards, parts, each = 4, 40, 10
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: shards})
	for i := 0; i < each; i++ {
		var msgs []srq.Message[int]
		for p := 0; p < parts; p++ {
			msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: fmt.Sprint(p), Ordered: p%2 == 0}})
		}
		res, err := q.PublishBatch(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range res {
			if r.ID == "" || r.Duplicate {
				t.Fatalf("message %d: %+v", j, r)
			}
		}
	}
	for i, eng := range q.Shards() {
		st, err := eng.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Published == 0 {
			t.Fatalf("shard %d (%s) got no task", i, eng.Config().Queue)
		}
	}
	var (
		mu       sync.Mutex
		next     = map[partition.Key]int{}
		running  = map[partition.Key]bool{}
		problems []string
		done     atomic.Int64
	)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		p := task.Partition
		mu.Lock()
		if p.IsOrdered() {
			if running[p] {
				problems = append(problems, fmt.Sprintf("%s: two tasks at once", p))
			}
			if next[p] != task.Value {
				problems = append(problems, fmt.Sprintf("%s: got %d, want %d", p, task.Value, next[p]))
			}
			running[p], next[p] = true, task.Value+1
		}
		mu.Unlock()
		mu.Lock()
		running[p] = false
		mu.Unlock()
		done.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: 8, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every task", func() bool { return done.Load() == parts*each })
	stop()
	for _, p := range problems[:min(len(problems), 20)] {
		t.Error(p)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Published != parts*each || st.Acked != parts*each || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("summed stats %+v", st)
	}
}

// TestShardOfIsStable: a partition's tasks all land in the shard ShardOf names.
func TestShardOfIsStable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Shards: 3})
	for i := 0; i < 5; i++ {
		if _, err := q.Publish(ctx, "x", &srq.PublishOpts{Partition: "user-7", Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	home := q.ShardOf(partition.Ordered("user-7"))
	for _, eng := range q.Shards() {
		st, err := eng.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if eng == home {
			want = 5
		}
		if st.Pending != want {
			t.Fatalf("shard %s holds %d tasks, want %d", eng.Config().Queue, st.Pending, want)
		}
	}
}

// TestIdleShardsHoldNoSlot: with one handler, no prefetch and many shards, the fetchers of idle
// shards wait in Redis without holding the only slot, so the busy shard's tasks all run.
func TestIdleShardsHoldNoSlot(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 8})
	const n = 50
	for i := 0; i < n; i++ {
		if _, err := q.Publish(ctx, i, &srq.PublishOpts{Partition: "only", Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		done.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Prefetch: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every task", func() bool { return done.Load() == n })
	stop()
}

// TestRunOnceServesEveryShard: RunOnce fetches from every shard until its capacity is used.
func TestRunOnceServesEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 4})
	var msgs []srq.Message[int]
	for p := 0; p < 20; p++ {
		msgs = append(msgs, srq.Message[int]{Value: p, Opts: srq.PublishOpts{Partition: fmt.Sprint(p)}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		done.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: 10, Prefetch: 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.RunOnce(ctx)
	if err != nil || n != 20 || done.Load() != 20 {
		t.Fatalf("RunOnce: %d tasks, %v; %d done (want 20)", n, err, done.Load())
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Acked != 20 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// TestShardCountIsFixed: once a queue is registered with a shard count, producers and workers
// configured with another count are refused, before they write or fetch anything.
func TestShardCountIsFixed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Client(t)
	name := redistest.Queue(t)
	q3, err := srq.NewQueue[int](c, srq.QueueConfig{Name: name, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q3.Publish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	q2, err := srq.NewQueue[int](c, srq.QueueConfig{Name: name, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q2.Publish(ctx, 2, nil); !errors.Is(err, srq.ErrShardCount) {
		t.Fatalf("publish with 2 shards to a 3-shard queue: %v, want ErrShardCount", err)
	}
	w, err := srq.NewWorker(q2, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Run(runCtx); !errors.Is(err, srq.ErrShardCount) {
		t.Fatalf("Run with the wrong shard count: %v, want ErrShardCount", err)
	}
	if _, err := w.RunOnce(ctx); !errors.Is(err, srq.ErrShardCount) {
		t.Fatalf("RunOnce with the wrong shard count: %v, want ErrShardCount", err)
	}
	// A worker of several queues registers them all first, and fails the same way.
	other, _ := newQueue[int](t, srq.QueueConfig{})
	handler := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
	multi, err := srq.NewWorkerOf(srq.WorkerConfig{Logger: quiet}, srq.Serve(other, handler, nil), srq.Serve(q2, handler, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := multi.Run(runCtx); !errors.Is(err, srq.ErrShardCount) {
		t.Fatalf("NewWorkerOf's Run with the wrong shard count: %v, want ErrShardCount", err)
	}
	st, err := q3.Stats(ctx)
	if err != nil || st.Published != 1 {
		t.Fatalf("stats %+v, %v: the refused publish wrote something", st, err)
	}
	qs, err := engine.Queues(ctx, c, engine.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, qi := range qs {
		if qi.Name == name {
			found = qi.Shards == 3
		}
	}
	if !found {
		t.Fatalf("queue %s with 3 shards not in the registry %v", name, qs)
	}
}

// TestShardedPublishIsValidatedWhole: one invalid message refuses the whole batch, on every shard.
func TestShardedPublishIsValidatedWhole(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{Shards: 4})
	var msgs []srq.Message[int]
	for p := 0; p < 20; p++ {
		msgs = append(msgs, srq.Message[int]{Value: p, Opts: srq.PublishOpts{Partition: fmt.Sprint(p)}})
	}
	msgs[13].Opts.Delay = -time.Second
	if _, err := q.PublishBatch(ctx, msgs); !errors.Is(err, srq.ErrInvalid) {
		t.Fatalf("publish with a negative delay: %v, want ErrInvalid", err)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Published != 0 {
		t.Fatalf("stats %+v, %v: an invalid batch wrote tasks", st, err)
	}
	if _, err := engine.QueueShards(ctx, redistest.Client(t), engine.DefaultPrefix, q.Name()); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("after a refused publish the queue is registered: %v", err)
	}
}

// TestShardConfigErrors: bad shard counts and names that would collide with shards are refused.
func TestShardConfigErrors(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	for _, cfg := range []srq.QueueConfig{
		{Name: "q", Shards: -1},
		{Name: "q", Shards: engine.MaxShards + 1},
		{Name: "orders#1"},
	} {
		if _, err := srq.NewQueue[int](c, cfg); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("NewQueue(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
}

// TestBusyWorkerHandsOnWakeUps: worker A's only slot is busy with a task of shard 0 while its
// fetcher of shard 1 sleeps in Redis. A publish to shard 1 wakes that fetcher, which has no slot:
// it must hand the wake-up on (push the token back), so an idle worker sleeping on shard 1 would
// take the task at once instead of at the end of its wait. Then worker B runs the task.
func TestBusyWorkerHandsOnWakeUps(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "counts its blocked clients")
	ctx := testCtx(t)
	c := srv.Client(t)
	q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: "wake", Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(shard int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprint("k", i); q.ShardOf(partition.Key(k)) == q.Shards()[shard] {
				return k
			}
		}
	}
	blocked := func(n int) func() bool {
		return func() bool {
			info, err := c.Info(ctx, "clients").Result()
			return err == nil && strings.Contains(info, fmt.Sprintf("blocked_clients:%d\r", n))
		}
	}
	release := make(chan struct{})
	busy := make(chan struct{})
	ran := make(chan string, 1)
	h := srq.HandlerFunc[string](func(_ context.Context, task *srq.Task[string]) error {
		if task.Value == "long" {
			close(busy)
			<-release
			return nil
		}
		ran <- task.Value
		return nil
	})
	cfg := srq.WorkerConfig{Concurrency: 1, Prefetch: -1, PollWait: time.Minute, Logger: quiet}
	a, _ := srq.NewWorker(q, h, cfg)
	runWorker(t, a)
	defer close(release)
	waitFor(t, "A's two fetchers to wait in Redis", blocked(2))
	if _, err := q.Publish(ctx, "long", &srq.PublishOpts{Partition: keyOf(0)}); err != nil {
		t.Fatal(err)
	}
	<-busy // A's shard-0 fetcher took the only slot; its shard-1 fetcher still waits in Redis
	waitFor(t, "A's shard-1 fetcher alone to wait in Redis", blocked(1))
	if _, err := q.Publish(ctx, "quick", &srq.PublishOpts{Partition: keyOf(1)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's shard-1 fetcher to be woken", blocked(0))
	wake := q.Shards()[1].Keys().Wake()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.LLen(ctx, wake).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy worker kept the wake-up: %d tokens in %s", n, wake)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, _ := srq.NewWorker(q, h, cfg)
	runWorker(t, b)
	select {
	case v := <-ran:
		if v != "quick" {
			t.Fatalf("ran %q", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker B did not run the task of shard 1")
	}
}
