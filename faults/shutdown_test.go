package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/srqtest/history"
)

// TestGracefulShutdownUnderLoad stops two workers at a random point while a producer publishes
// and their handlers run: one waits for its running handlers, the other cuts them off at once.
// Afterwards nothing may be leased (the inflight set and every held set empty), and every task
// that did not complete must be pending with no attempt used (handed back, not failed). A third
// worker then runs the rest; the whole history must have no anomaly: nothing lost, nothing run
// twice (a graceful shutdown acks what completed before it returns).
func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	srv := realServer(t)
	ctx := testCtx(t, 2*time.Minute)
	c := client(t, srv, nil)
	q, err := srq.NewQueue[task](c, srq.QueueConfig{Name: "shutdown"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	rec := history.NewRecorder("test", nil)
	var stops []func()
	for i, timeout := range []time.Duration{10 * time.Second, -1} {
		w, err := srq.NewWorker(q, work(20*time.Millisecond), srq.WorkerConfig{Concurrency: 4, Prefetch: 8,
			ShutdownTimeout: timeout, Logger: quiet, Middleware: []srq.Middleware{rec.Middleware(fmt.Sprint("w", i))}})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, runWorker(t, w, 30*time.Second))
	}
	const total = 3000
	msgs := workload(rng, "g", total, 20, 5)
	pctx, stopProducing := context.WithCancel(ctx)
	tick := time.NewTicker(10 * time.Millisecond) // the producer's pace: a batch of 10 each
	defer tick.Stop()
	p := &producer{name: "p", q: q, rec: rec, batch: 10, pace: func() { <-tick.C }}
	produced := make(chan error, 1)
	go func() { produced <- p.run(pctx, msgs) }()

	point := int64(300 + rng.IntN(total/2))
	waitUntil(t, "the shutdown point", 60*time.Second, func() bool {
		s, ok := stats(ctx, eng)
		return ok && s.Acked >= point
	})
	s, _ := stats(ctx, eng)
	t.Logf("stopping the workers with %d acked, %d in flight", s.Acked, s.InFlight)
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
	stopProducing()
	<-produced // cut off: what it published so far is in the history

	if n, err := c.ZCard(ctx, eng.Keys().Inflight()).Result(); err != nil || n != 0 {
		t.Fatalf("after shutdown the inflight set holds %d tasks (%v)", n, err)
	}
	held, err := c.Keys(ctx, redistest.GlobEscape(eng.Keys().Base()+"l:")+"*").Result()
	if err != nil || len(held) != 0 {
		t.Fatalf("after shutdown held sets remain: %q (%v)", held, err)
	}
	done := map[string]bool{}
	for _, e := range rec.Events() {
		if e.Op == history.OpEnd && e.OK {
			done[e.ID] = true
		}
	}
	waiting := 0
	for _, e := range rec.Events() {
		if e.Op != history.OpPublish || done[e.ID] {
			continue
		}
		waiting++
		ti, err := eng.Task(ctx, e.ID)
		if err != nil || ti.State != "pending" || ti.Attempts != 0 {
			t.Fatalf("task %s after shutdown: %+v, %v; want pending with no attempt used", e.ID, ti, err)
		}
	}
	t.Logf("%d tasks completed before the shutdown, %d pending", len(done), waiting)

	w, err := srq.NewWorker(q, work(0), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{rec.Middleware("w2")}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w, 30*time.Second)
	waitUntil(t, "the rest to run", 60*time.Second, func() bool { return drained(ctx, eng) })
	stop()
	check(t, rec.Events())
}
