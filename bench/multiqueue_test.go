package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

// BenchmarkMultiQueue compares one worker over 10 queues (NewWorkerOf, equal weights) with one
// worker over a single queue, under the same total load: b.N tasks published before the clock
// starts, over 100 unordered partitions, spread evenly over the queues; Concurrency 8 and the
// default Prefetch; handlers that return at once or after 200µs. Each op runs both, twice each on
// half of the tasks; it reports the tasks/s of each (tasks/s-1q, tasks/s-10q), their ratio
// (10q/1q), and the script calls (round trips) per task of each (evals/task-1q, -10q), which a
// load on the machine does not change.
func BenchmarkMultiQueue(b *testing.B) {
	for _, sleep := range []time.Duration{0, 200 * time.Microsecond} {
		b.Run(fmt.Sprintf("handler-%v", sleep), func(b *testing.B) {
			// In the order 1, 10, 10, 1 queues, half of b.N tasks each, so that a load on the
			// machine that comes or goes during the op weighs on both alike.
			var one, ten time.Duration
			var evalsOne, evalsTen int64
			half := max(b.N/2, 1)
			for _, k := range []int{1, 10, 10, 1} {
				d, evals := consumeQueues(b, k, half, sleep)
				if k == 1 {
					one, evalsOne = one+d, evalsOne+evals
				} else {
					ten, evalsTen = ten+d, evalsTen+evals
				}
			}
			perSec := func(d time.Duration) float64 { return float64(2*half) / d.Seconds() }
			b.ReportMetric(perSec(one), "tasks/s-1q")
			b.ReportMetric(perSec(ten), "tasks/s-10q")
			b.ReportMetric(perSec(ten)/perSec(one), "10q/1q")
			b.ReportMetric(float64(evalsOne)/float64(2*half), "evals/task-1q")
			b.ReportMetric(float64(evalsTen)/float64(2*half), "evals/task-10q")
		})
	}
}

// consumeQueues publishes n tasks spread over k fresh queues, then times a worker over all of them
// (NewWorker for one queue) until it has run them all, and returns how long that took and how many
// script calls Redis ran meanwhile. The clock of b runs only while the worker does.
func consumeQueues(b *testing.B, k, n int, sleep time.Duration) (time.Duration, int64) {
	b.StopTimer()
	c := redistest.Client(b)
	var done atomic.Int64
	all := make(chan struct{})
	h := srq.HandlerFunc[payload](func(context.Context, *srq.Task[payload]) error {
		if sleep > 0 {
			time.Sleep(sleep)
		}
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	var (
		qs     []*srq.Queue[payload]
		served []srq.Served
	)
	for i := range k {
		q, err := srq.NewQueue[payload](c, srq.QueueConfig{Name: fmt.Sprintf("%s-%d", redistest.Queue(b), i)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dropQueue(b, q.Engine()) })
		publishTyped(context.Background(), b, q, n/k+min(1, max(0, n%k-i)), 100, false)
		qs = append(qs, q)
		served = append(served, srq.Serve(q, h, nil))
	}
	cfg := srq.WorkerConfig{Concurrency: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var (
		w   *srq.Worker
		err error
	)
	if k == 1 {
		w, err = srq.NewWorker(qs[0], h, cfg)
	} else {
		w, err = srq.NewWorkerOf(cfg, served...)
	}
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	cost := startCost(b, c)
	start := time.Now()
	b.StartTimer()
	go func() { ran <- w.Run(ctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("processed %d of %d", done.Load(), n)
	}
	b.StopTimer()
	elapsed := time.Since(start)
	evals := readRedisCost(b, c).scripts - cost.scripts
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return elapsed, evals
}
