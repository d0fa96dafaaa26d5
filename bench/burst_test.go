package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// BenchmarkWorkerBurst measures what prefetching costs slow handlers: two workers of 8 handlers
// that take 2 ms each share one queue, and each op publishes a burst of 64 tasks and waits until
// all 64 are done (ns per burst). With the work shared evenly a burst takes about 4 handler
// times; a worker that prefetched the whole burst would run it alone in 8. It runs the default
// (adaptive) prefetch beside fixed ones, and reports the largest share of a burst one worker ran.
func BenchmarkWorkerBurst(b *testing.B) {
	const burst, handler = 64, 2 * time.Millisecond
	for _, prefetch := range []int{0, 8, 56} {
		name := fmt.Sprintf("prefetch-%d", prefetch)
		if prefetch == 0 {
			name = "prefetch-default"
		}
		b.Run(name, func(b *testing.B) {
			q := newTypedQueue(b)
			var done atomic.Int64
			var mu sync.Mutex
			ran := map[int]int{} // tasks run by each worker in the current burst
			signal := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for w := range 2 {
				h := srq.HandlerFunc[payload](func(context.Context, *srq.Task[payload]) error {
					time.Sleep(handler)
					mu.Lock()
					ran[w]++
					mu.Unlock()
					if done.Add(1)%burst == 0 {
						signal <- struct{}{}
					}
					return nil
				})
				wk, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 8, Prefetch: prefetch,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					if err := wk.Run(ctx); err != nil {
						b.Error(err)
					}
				})
			}
			defer func() { cancel(); wg.Wait() }()
			most := 0
			b.ResetTimer()
			for range b.N {
				publishTyped(ctx, b, q, burst, 64, false)
				select {
				case <-signal:
				case <-time.After(time.Minute):
					b.Fatalf("a burst of %d did not finish: %d done", burst, done.Load())
				}
				mu.Lock()
				most += max(ran[0], ran[1])
				clear(ran)
				mu.Unlock()
			}
			b.StopTimer()
			b.ReportMetric(float64(most)/float64(b.N*burst), "largest-share")
		})
	}
}
