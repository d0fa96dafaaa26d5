package faults_test

import (
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/logtest"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/srqtest/history"
)

// TestRedisKilledAndRestarted kills redis-server (appendonly yes, appendfsync always) with SIGKILL
// twice, at random points while two producers publish and two workers run, and restarts it on its
// directory after a random outage. Every publish Redis acknowledged must complete; order and
// exclusivity of ordered partitions must hold. A task may complete twice (its ack was lost with
// the server, so it ran again after its lease expired): at-least-once allows it.
func TestRedisKilledAndRestarted(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	srv := realServer(t, redistest.DurableArgs...)
	ctx := testCtx(t, 2*time.Minute)
	c := client(t, srv, nil)
	q, err := srq.NewQueue[task](c, srq.QueueConfig{Name: "restarted"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	rec := history.NewRecorder("test", nil)
	for i := 0; i < 2; i++ {
		w, err := srq.NewWorker(q, work(2*time.Millisecond), srq.WorkerConfig{Concurrency: 4, Lease: time.Second,
			Logger: quiet, Retry: func(int, error) time.Duration { return 10 * time.Millisecond },
			Middleware: []srq.Middleware{rec.Middleware(fmt.Sprint("w", i))}})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w, 30*time.Second)
	}

	const total, batch, restarts = 3000, 10, 2
	// The producers take turns with the crashes: each publishes a batch per tick, and the test
	// kills the server when a random number of batches has been published.
	batches := make(chan struct{})
	msgs := workload(rng, "r", total, 30, 10)
	var wg sync.WaitGroup
	produced := make(chan error, 2)
	for i := 0; i < 2; i++ {
		p := &producer{name: fmt.Sprint("p", i), q: q, rec: rec, batch: batch, pace: func() { <-batches }}
		part := msgs[i*total/2 : (i+1)*total/2]
		wg.Go(func() { produced <- p.run(ctx, part) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Crash points: one in each of the first restarts slices of 20%–80% of the batches.
	points := map[int]bool{}
	span := total / batch * 3 / 5 / restarts
	for i := 0; i < restarts; i++ {
		points[total/batch/5+i*span+rng.IntN(span)] = true
	}
	tick := time.NewTicker(2 * time.Millisecond) // the producers' pace: a batch each
	defer tick.Stop()
	for n := 0; ; n++ {
		if points[n] {
			down := time.Duration(100+rng.IntN(500)) * time.Millisecond
			s, _ := stats(ctx, eng)
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			<-time.After(down) // the outage is the fault
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			t.Logf("redis-server killed after %d batches (%d acked, %d in flight), restarted after %v", n, s.Acked, s.InFlight, down)
		}
		select {
		case batches <- struct{}{}:
			<-tick.C
			continue
		case <-done:
		}
		break
	}
	for i := 0; i < 2; i++ {
		if err := <-produced; err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "every task to run", 60*time.Second, func() bool { return drained(ctx, eng) })
	r := check(t, rec.Events(), history.Duplicate)
	t.Logf("%d tasks completed twice (acks lost with the server)", r.Count(history.Duplicate))
	if r.Published != total || r.Completed != total {
		t.Errorf("published %d, completed %d; want %d each", r.Published, r.Completed, total)
	}
	if s, _ := stats(ctx, eng); s.Dead != 0 {
		t.Errorf("%d dead letters", s.Dead)
	}
}

// TestRedisPaused stops Redis with SIGSTOP for 5 s while two workers run and a producer publishes.
// The workers' fetches fail: they must log it and back off (growing delays between tries), then
// resume when Redis does, and lose nothing. The test then checks that no goroutine of the workers
// is left (goleak): it does not run in parallel with other tests for that.
func TestRedisPaused(t *testing.T) {
	// Registered first, so it runs last: after the workers, clients and server are gone.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	srv := realServer(t)
	ctx := testCtx(t, 2*time.Minute)
	// Short timeouts so failures come fast; no retries inside go-redis, so each failure is seen.
	c := client(t, srv, func(o *redis.Options) {
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout, o.MaxRetries = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond, -1
	})
	q, err := srq.NewQueue[task](c, srq.QueueConfig{Name: "paused"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	rec := history.NewRecorder("test", nil)
	logs := &logtest.Recorder{}
	var stops []func()
	for i := 0; i < 2; i++ {
		w, err := srq.NewWorker(q, work(5*time.Millisecond), srq.WorkerConfig{Concurrency: 4, Lease: 2 * time.Second,
			Logger: slog.New(logs), Retry: func(int, error) time.Duration { return 10 * time.Millisecond },
			Middleware: []srq.Middleware{rec.Middleware(fmt.Sprint("w", i))}})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, runWorker(t, w, 30*time.Second))
	}
	rng := newRand(t)
	msgs := workload(rng, "s", 1000, 20, 5)
	p := &producer{name: "p", q: q, rec: rec, batch: 10}
	if err := p.run(ctx, msgs[:500]); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "work to start", 30*time.Second, func() bool {
		s, ok := stats(ctx, eng)
		return ok && s.Acked >= 50
	})

	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// A producer keeps publishing through the pause, retrying until Redis acknowledges.
	produced := make(chan error, 1)
	go func() { produced <- p.run(ctx, msgs[500:]) }()
	<-time.After(5 * time.Second) // the pause is the fault
	if err := srv.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("Redis paused for %v", time.Since(paused))
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every task to run", 60*time.Second, func() bool { return drained(ctx, eng) })
	for _, stop := range stops {
		stop()
	}

	fetchFails := logs.Find("fetch failed")
	t.Logf("%d fetch failures logged, %d log records in all; producer retries: %d", len(fetchFails), logs.Len(), p.failures)
	if len(fetchFails) == 0 {
		t.Error("no fetch failure was logged while Redis was paused")
	}
	// Backing off: the delay before the next try grows (50ms, 100ms, …), so some failure was
	// followed by a wait of 200ms or more, and the tries were few.
	var longest time.Duration
	for _, r := range fetchFails {
		if d, ok := logtest.Attr(r, "in").(time.Duration); ok {
			longest = max(longest, d)
		}
	}
	if longest < 200*time.Millisecond || len(fetchFails) > 30 {
		t.Errorf("%d fetch failures, longest backoff %v: want a growing backoff, at most 30 tries", len(fetchFails), longest)
	}
	r := check(t, rec.Events(), history.Duplicate)
	if r.Published != len(msgs) || r.Completed != len(msgs) {
		t.Errorf("published %d, completed %d; want %d each", r.Published, r.Completed, len(msgs))
	}
}
