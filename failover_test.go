package srq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
	"github.com/srqueue/srq/srqtest/history"
)

// TestClusterShardedFailover runs a 6-shard queue on a local Redis Cluster of 3 masters with a
// replica each: two producers and two workers, ordered and unordered partitions, and a coordinated
// failover (CLUSTER FAILOVER on a replica) of a master in the middle of the run. Producers retry a
// failed publish; workers log, back off and go on by themselves. The history must show no task
// lost (the failover is coordinated: nothing acknowledged is dropped), none out of order, no
// overlap, every script on its shard's node (a CROSSSLOT error would fail the publishes), and the
// script work on every master.
func TestClusterShardedFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster of 6 processes")
	}
	t.Parallel()
	cl := redistest.StartCluster(t)
	ctx := testCtx(t)
	before, err := cl.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events, _ := runFailoverScenario(t, cl.Client(t), 6, func(ctx context.Context) error { return cl.Failover(ctx, 0) })
	rep := history.Check(events)
	t.Logf("history: %s", rep)
	if err := rep.Err(history.Duplicate); err != nil {
		t.Fatal(err)
	}
	after, err := cl.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range after {
		if after[i].Total("evalsha", "eval", "fcall", "fcall_ro").Calls == before[i].Total("evalsha", "eval", "fcall", "fcall_ro").Calls {
			t.Errorf("master %s ran no script: the shards did not spread", after[i].Addr)
		}
	}
}

// TestSentinelFailover runs the same scenario on a Sentinel setup (a master, a replica, a
// sentinel) through a failover client, with a SENTINEL FAILOVER in the middle. Sentinel promotes
// the replica without a handshake, and the old master goes on acknowledging writes until it is
// turned into a replica, which then discards them (docs/scaling.md). So the test allows lost
// publishes, counts them, and checks that each was acknowledged during the failover; and it checks
// the order of every task that survived: the history without the lost publishes must show nothing
// lost, unexpected, out of order or overlapping.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel setup of 3 processes")
	}
	t.Parallel()
	s := redistest.StartSentinel(t)
	events, window := runFailoverScenario(t, s.UniversalClient(t), 1, s.Failover)
	rep := history.Check(events)
	lost := map[string]bool{}
	for _, a := range rep.Anomalies {
		if a.Kind == history.Lost {
			lost[a.ID] = true
		}
	}
	var survivors []history.Event
	for _, e := range events {
		if e.Op == history.OpPublish && lost[e.ID] {
			if at := time.Unix(0, e.Time); at.Before(window[0]) || at.After(window[1]) {
				t.Errorf("publish of %s acknowledged at %v, outside the failover (%v to %v), was lost",
					e.ID, at.Format(time.StampMicro), window[0].Format(time.StampMicro), window[1].Format(time.StampMicro))
			}
			continue
		}
		survivors = append(survivors, e)
	}
	t.Logf("lost in the failover (%v): %d of %d acknowledged publishes; duplicate runs: %d",
		window[1].Sub(window[0]).Round(time.Millisecond), len(lost), rep.Published, rep.Count(history.Duplicate))
	if err := history.Check(survivors).Err(history.Duplicate); err != nil {
		t.Fatalf("the tasks that survived the failover: %v", err)
	}
}

// runFailoverScenario publishes tasks from two producers over 200 partitions (half of them
// ordered) while two workers run them: 4,000 tasks, and more until the failover, called once a
// third is published, has ended. It waits until every acknowledged publish has completed or
// nothing has moved for 8 s, and returns the history and when the failover began and ended.
func runFailoverScenario(t *testing.T, c redis.UniversalClient, shards int, failover func(context.Context) error) (
	events []history.Event, window [2]time.Time) {
	t.Helper()
	ctx := testCtx(t)
	name := redistest.Queue(t)
	rec := history.NewRecorder("test", nil)
	var (
		mu   sync.Mutex
		done = map[string]bool{}
	)
	newWorker := func(id string) *srq.Worker {
		q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: name, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(_ context.Context, task *srq.Task[int]) error {
			mu.Lock()
			done[task.ID] = true
			mu.Unlock()
			return nil
		}), srq.WorkerConfig{Concurrency: 16, Lease: 2 * time.Second, RecoverInterval: 300 * time.Millisecond,
			PollWait: 200 * time.Millisecond, ConsumerID: id, Logger: quiet,
			Middleware: []srq.Middleware{rec.Middleware(id)}})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	stopA := runWorker(t, newWorker("worker-a"))
	stopB := runWorker(t, newWorker("worker-b"))

	const producers, perProducer, batch, parts = 2, 2000, 20, 200
	failed := make(chan struct{})
	var failoverErr error
	var once sync.Once
	var pubs sync.WaitGroup
	var published atomic.Int64
	for p := 0; p < producers; p++ {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: name, Shards: shards})
			if err != nil {
				t.Error(err)
				return
			}
			producer := fmt.Sprintf("producer-%d", p)
			// Publishing goes on until the failover has ended, so publishes meet the switch.
			for i := 0; i < perProducer || !closed(failed); i += batch {
				if p == 0 && i >= perProducer/3 {
					once.Do(func() {
						go func() {
							defer close(failed)
							window[0] = time.Now()
							failoverErr = failover(ctx)
							window[1] = time.Now()
						}()
					})
				}
				msgs := make([]srq.Message[int], 0, batch)
				for j := i; j < i+batch; j++ {
					k := (j*7 + p) % parts
					msgs = append(msgs, srq.Message[int]{Value: j, Opts: srq.PublishOpts{
						ID: fmt.Sprintf("%s-%d", producer, j), Partition: fmt.Sprint(k), Ordered: k%2 == 0}})
				}
				if !publishUntilAcknowledged(ctx, t, q, msgs) {
					return
				}
				for _, m := range msgs {
					key := partition.Key(m.Opts.Partition)
					if m.Opts.Ordered {
						key = partition.Ordered(m.Opts.Partition)
					}
					rec.Published(producer, m.Opts.ID, key)
					published.Add(1)
				}
			}
		}()
	}
	pubs.Wait()
	<-failed
	if failoverErr != nil {
		t.Fatalf("failover: %v", failoverErr)
	}
	// Wait until every acknowledged publish completed, or nothing moved for a while: a lost
	// publish never completes, and the checker counts it.
	total := int(published.Load())
	last, lastMove := -1, time.Now()
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n == total {
			break
		}
		if n != last {
			last, lastMove = n, time.Now()
		}
		if time.Since(lastMove) > 8*time.Second {
			t.Logf("%d of %d tasks completed; nothing moved for 8s", n, total)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopA()
	stopB()
	return rec.Events(), window
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// publishUntilAcknowledged publishes msgs, retrying with backoff while Redis fails over, until it
// succeeds (the ids are fixed, so a retry of a batch that did land is reported as duplicates).
// It reports false when ctx ended first.
func publishUntilAcknowledged(ctx context.Context, t *testing.T, q *srq.Queue[int], msgs []srq.Message[int]) bool {
	backoff := 10 * time.Millisecond
	for {
		_, err := q.PublishBatch(ctx, msgs)
		if err == nil {
			return true
		}
		if errors.Is(err, srq.ErrInvalid) || ctx.Err() != nil {
			t.Errorf("publish: %v", err)
			return false
		}
		select {
		case <-ctx.Done():
			t.Errorf("publish: %v", err)
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
