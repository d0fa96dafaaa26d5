package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

type payload struct {
	User string
	Seq  int
	Body string
}

// BenchmarkEndToEnd measures typed throughput end to end: b.N tasks published in batches of 100
// while a worker with 8 no-op handlers processes them; one op is one task published and acked.
func BenchmarkEndToEnd(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		b.Run(fmt.Sprintf("ordered=%v", ordered), func(b *testing.B) {
			q := newTypedQueue(b)
			runWorker(b, q, srq.WorkerConfig{Concurrency: 8}, 0, func(ctx context.Context) { publishTyped(ctx, b, q, b.N, 1000, ordered) })
		})
	}
}

// BenchmarkConsumeWorker measures consuming with srq's pool: a worker with 8 handlers
// (Concurrency 8, the default Prefetch of 8) processes b.N tasks published before the timer starts
// over 100 unordered partitions. Where ConsumeParallel/consumers-8 has 8 consumers each fetching
// and acking 5 on their own, the worker fetches for its free slots and acks in batches. The
// handlers return at once (concurrency-8), or after sleeping 200µs or 2ms, as handlers waiting on
// other services do: the worker's calls then overlap the handlers rather than each other.
func BenchmarkConsumeWorker(b *testing.B) {
	for _, h := range []struct {
		name  string
		sleep time.Duration
	}{{"concurrency-8", 0}, {"concurrency-8-handler-200us", 200 * time.Microsecond}, {"concurrency-8-handler-2ms", 2 * time.Millisecond}} {
		b.Run(h.name, func(b *testing.B) {
			q := newTypedQueue(b)
			publishTyped(context.Background(), b, q, b.N, 100, false)
			runWorker(b, q, srq.WorkerConfig{Concurrency: 8}, h.sleep, nil)
		})
	}
}

// BenchmarkConsumeWorkerPrefetch is BenchmarkConsumeWorker with 8 handlers and the default
// (adaptive) prefetch beside fixed ones of 8, 32 and 56, the handlers returning at once or after
// 200µs: how much fewer, larger fetches gain (docs/worker.md, "Throughput"). The worker keeps two
// fetches in flight, the second waiting for half of Concurrency + Prefetch, so with handlers that
// return at once a fixed Prefetch sets the size of a call: 8, 20 and 32 tasks. Prefetch 32 holds
// 40 tasks at most, as ConsumeParallel/consumers-8's 8 consumers of 5 do.
func BenchmarkConsumeWorkerPrefetch(b *testing.B) {
	for _, sleep := range []time.Duration{0, 200 * time.Microsecond} {
		for _, prefetch := range []int{0, 8, 32, 56} {
			size := fmt.Sprint(prefetch)
			if prefetch == 0 {
				size = "default"
			}
			name := "handler-0/prefetch-" + size
			if sleep > 0 {
				name = fmt.Sprintf("handler-%v/prefetch-%s", sleep, size)
			}
			b.Run(name, func(b *testing.B) {
				q := newTypedQueue(b)
				publishTyped(context.Background(), b, q, b.N, 100, false)
				runWorker(b, q, srq.WorkerConfig{Concurrency: 8, Prefetch: prefetch}, sleep, nil)
			})
		}
	}
}

// newTypedQueue returns a typed queue on a fresh queue of the benchmark Redis; its keys are
// removed after.
func newTypedQueue(b *testing.B) *srq.Queue[payload] {
	q, err := srq.NewQueue[payload](redistest.Client(b), srq.QueueConfig{Name: redistest.Queue(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dropQueue(b, q.Engine()) })
	return q
}

// publishTyped publishes n tasks over parts partitions in batches of 100.
func publishTyped(ctx context.Context, b *testing.B, q *srq.Queue[payload], n, parts int, ordered bool) {
	for i := 0; i < n; i += 100 {
		batch := make([]srq.Message[payload], 0, 100)
		for j := i; j < min(i+100, n); j++ {
			o := srq.PublishOpts{Partition: fmt.Sprint(j % parts), Ordered: ordered}
			batch = append(batch, srq.Message[payload]{Value: payload{User: o.Partition, Seq: j, Body: "twenty bytes of body"}, Opts: o})
		}
		if _, err := q.PublishBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// runWorker times a worker of cfg (its Logger discards) whose handlers each sleep for sleep (0:
// not at all), until it has processed b.N tasks, running publish (if not nil) beside it, and
// reports tasks/s and the Redis cost per task.
func runWorker(b *testing.B, q *srq.Queue[payload], cfg srq.WorkerConfig, sleep time.Duration, publish func(context.Context)) {
	c := q.Engine().Client()
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	h := srq.HandlerFunc[payload](func(context.Context, *srq.Task[payload]) error {
		if sleep > 0 {
			time.Sleep(sleep)
		}
		if done.Add(1) == n {
			close(all)
		}
		return nil
	})
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := srq.NewWorker(q, h, cfg)
	if err != nil {
		b.Fatal(err)
	}
	timeWorker(b, c, w, all, &done, publish)
}

// timeWorker runs w, and publish (if not nil) beside it, timing until all is closed (done counts
// the tasks processed so far), and reports tasks/s and the Redis cost per task on c.
func timeWorker(b *testing.B, c redis.UniversalClient, w *srq.Worker, all <-chan struct{}, done *atomic.Int64, publish func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	cost := startCost(b, c)
	b.ResetTimer()
	go func() { ran <- w.Run(ctx) }()
	if publish != nil {
		publish(ctx)
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("processed %d of %d", done.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, c, b.N)
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
