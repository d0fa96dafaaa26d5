package bench

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// BenchmarkBatchWorker compares a batch handler of 100 (NewBatchWorker, MaxSize 100, MaxWait 5ms,
// Concurrency 8 and the batch worker's default prefetch, 800) with the Worker of 8 handlers and a
// fixed Prefetch of 56 (BenchmarkConsumeWorkerPrefetch's largest), both over b.N tasks published
// before the timer starts on 100 unordered partitions, the handlers returning at once: what the
// same work costs per task, in Redis and in the client, taken 100 at a time rather than one by one.
func BenchmarkBatchWorker(b *testing.B) {
	b.Run("worker-prefetch-56", func(b *testing.B) {
		q := newTypedQueue(b)
		publishTyped(context.Background(), b, q, b.N, 100, false)
		runWorker(b, q, srq.WorkerConfig{Concurrency: 8, Prefetch: 56}, 0, nil)
	})
	b.Run("batch-100", func(b *testing.B) {
		q := newTypedQueue(b)
		publishTyped(context.Background(), b, q, b.N, 100, false)
		runBatchWorker(b, q, srq.BatchConfig{MaxSize: 100, MaxWait: 5 * time.Millisecond}, srq.WorkerConfig{Concurrency: 8})
	})
}

// runBatchWorker times a batch worker of bc and cfg (its Logger discards) whose handler returns at
// once, until it has processed b.N tasks, and reports tasks/s and the Redis cost per task, as
// runWorker does.
func runBatchWorker(b *testing.B, q *srq.Queue[payload], bc srq.BatchConfig, cfg srq.WorkerConfig) {
	c := q.Engine().Client()
	var done atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	h := srq.BatchHandlerFunc[payload](func(_ context.Context, tasks []*srq.Task[payload]) error {
		if done.Add(int64(len(tasks))) == n {
			close(all)
		}
		return nil
	})
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := srq.NewBatchWorker(q, h, bc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	timeWorker(b, c, w, all, &done, nil)
}
