package srq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// slowShard is a go-redis hook that makes the calls of some scripts on one shard's keys hang for
// hang and then fail, as calls to a cluster node that stopped answering do (a read timeout).
type slowShard struct {
	processHookOnly
	shas scriptSet
	base string // the shard's key prefix
	hang time.Duration
	hit  chan struct{} // when not nil, signalled (without blocking) as a call starts to hang
}

func (h *slowShard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.shas.runs(cmd) && h.onShard(cmd) {
			if h.hit != nil {
				select {
				case h.hit <- struct{}{}:
				default:
				}
			}
			t := time.NewTimer(h.hang)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			err := errors.New("injected: i/o timeout")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *slowShard) onShard(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasPrefix(s, h.base) {
			return true
		}
	}
	return false
}

// partitionOn returns a partition key (ordered or not) that lives in shard i of n.
func partitionOn(i, n int, ordered bool) (name string) {
	for k := 0; ; k++ {
		name = fmt.Sprintf("p%d", k)
		key := partition.Key(name)
		if ordered {
			key = partition.Ordered(name)
		}
		if engine.ShardOf(key, n) == i {
			return name
		}
	}
}

// TestSlowShardKeepsOtherShardsLeases: on a queue of two shards whose shard 0 stops answering
// (every extend.lua call on it hangs longer than a lease, then fails), a long handler of a task of
// shard 1, whose Redis answers, must keep its lease: its context must not end.
func TestSlowShardKeepsOtherShardsLeases(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{Shards: 2})
	// Long enough that a loaded machine (the race detector on two cores) does not delay the healthy
	// shard's extension past it.
	const lease = time.Second
	c.AddHook(&slowShard{shas: scriptSHAs(t, "extend"), base: q.Shards()[0].Keys().Base(), hang: 4 * lease})
	for i, name := range []string{"slow", "healthy"} {
		if _, err := q.Publish(ctx, name, &srq.PublishOpts{ID: name, Partition: partitionOn(i, 2, false)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	ended := map[string]error{} // the cause its context ended with, nil if it ran to the end
	done := make(chan struct{}, 2)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, task *srq.Task[string]) error {
		defer func() { done <- struct{}{} }()
		t := time.NewTimer(5 * lease)
		defer t.Stop()
		var cause error
		select {
		case <-t.C:
		case <-ctx.Done():
			cause = context.Cause(ctx)
		}
		mu.Lock()
		ended[task.Value] = cause
		mu.Unlock()
		return cause
	}), srq.WorkerConfig{Concurrency: 2, Lease: lease, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	<-done
	<-done
	mu.Lock()
	defer mu.Unlock()
	if err := ended["healthy"]; err != nil {
		t.Errorf("the handler of the task on the healthy shard lost its context: %v", err)
	}
}

// TestSlowShardDoesNotHoldUpOtherShardsAcks: on a queue of two shards whose shard 0 stops
// answering acks (every ack.lua call on it hangs, then fails), the tasks of an ordered partition of
// shard 1, whose Redis answers, must go on one after another: each is published by the handler of
// the one before, and fetched once that one's ack released the partition. Shard 0 meanwhile has a
// steady trickle of tasks whose handlers succeed, so its acks keep failing.
func TestSlowShardDoesNotHoldUpOtherShardsAcks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	const lease = 2 * time.Second
	slowAcks := &slowShard{shas: scriptSHAs(t, "ack"), base: q.Shards()[0].Keys().Base(), hang: 100 * time.Millisecond,
		hit: make(chan struct{}, 1)}
	c.AddHook(slowAcks)
	slow, ordered := partitionOn(0, 2, false), partitionOn(1, 2, true)
	const steps = 5
	orderedDone := make(chan int, steps)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		if task.Value < 0 { // shard 0: a trickle of tasks whose acks fail
			time.Sleep(20 * time.Millisecond)
			_, err := q.Publish(ctx, -1, &srq.PublishOpts{Partition: slow})
			return err
		}
		orderedDone <- task.Value
		if task.Value+1 < steps {
			_, err := q.Publish(ctx, task.Value+1, &srq.PublishOpts{Partition: ordered, Ordered: true})
			return err
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Lease: lease, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, -1, &srq.PublishOpts{Partition: slow}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	<-slowAcks.hit // shard 0's acks fail from now on
	if _, err := q.Publish(ctx, 0, &srq.PublishOpts{Partition: ordered, Ordered: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	timeout := time.After(lease) // with shard 0 answering, the five take a few ms
	for i := range steps {
		select {
		case v := <-orderedDone:
			if v != i {
				t.Fatalf("ordered task %d ran as number %d", v, i)
			}
		case <-timeout:
			t.Fatalf("%d of %d ordered tasks on the healthy shard ran in %v", i, steps, time.Since(start))
		}
	}
}

// TestSlowShardDoesNotHoldUpOtherShardsRecovery: on a queue of two shards whose shard 0 stops
// answering recoveries (every recover.lua call on it hangs, then fails), a task of shard 1 whose
// consumer died (its lease expired) must be recovered and run within a few RecoverIntervals.
func TestSlowShardDoesNotHoldUpOtherShardsRecovery(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	const hang, interval = 5 * time.Second, 50 * time.Millisecond
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "orphan", Partition: partitionOn(1, 2, false)}); err != nil {
		t.Fatal(err)
	}
	// A consumer that dies right after its fetch: its lease expires.
	if ds, err := q.Shards()[1].Fetch(ctx, "dead", 1, 10*time.Millisecond); err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	c.AddHook(&slowShard{shas: scriptSHAs(t, "recover"), base: q.Shards()[0].Keys().Base(), hang: hang})
	ran := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran <- struct{}{}
		return nil
	}), srq.WorkerConfig{RecoverInterval: interval, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runWorker(t, w)
	select {
	case <-ran:
		if d := time.Since(start); d > hang/2 {
			t.Fatalf("the orphaned task of the healthy shard ran after %v (RecoverInterval %v)", d, interval)
		}
	case <-ctx.Done():
		t.Fatal("the orphaned task did not run")
	}
}

// TestSlowShardDoesNotHoldUpOtherShardsFetches: on a queue of two shards whose shard 0 stops
// answering (every fetch.lua call on it hangs, then fails), a task published to shard 1, whose
// Redis answers, runs while shard 0's calls hang, not after them. The call that finds shard 0
// failing holds the free slots until it fails (the worker cannot know it will); from then on shard
// 0 is probed with one slot, outside the fetchers' turns.
func TestSlowShardDoesNotHoldUpOtherShardsFetches(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	// A task waiting for shard 0 would run after about hang; half of it leaves a loaded machine (the
	// race detector on two cores) room to schedule the pickup.
	const hang = 3 * time.Second
	slow := &slowShard{shas: scriptSHAs(t, "fetch", "ack_fetch"), base: q.Shards()[0].Keys().Base(), hang: hang,
		hit: make(chan struct{}, 1)}
	c.AddHook(slow)
	ran := make(chan time.Time, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran <- time.Now()
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	healthy := partitionOn(1, 2, false)
	<-slow.hit // the first call of shard 0 hangs, holding every free slot
	for i := range 3 {
		<-slow.hit // a probe of shard 0 is hanging now
		start := time.Now()
		if _, err := q.Publish(ctx, i, &srq.PublishOpts{Partition: healthy}); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-ran:
			if d := at.Sub(start); d > hang/2 {
				t.Fatalf("task %d of the healthy shard ran %v after its publish (shard 0's fetches hang %v)", i, d, hang)
			}
		case <-ctx.Done():
			t.Fatal("the task did not run")
		}
	}
}
