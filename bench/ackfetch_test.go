package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
)

// BenchmarkConsumeAckFetch is BenchmarkConsumePrefetch/prefetch-5 and
// BenchmarkConsumeParallel/consumers-8 with each ack and the next fetch sent as one AckFetch call
// (one round trip and one script per batch instead of two); ns per task.
func BenchmarkConsumeAckFetch(b *testing.B) {
	for _, consumers := range []int{1, 8} {
		b.Run(fmt.Sprintf("consumers-%d", consumers), func(b *testing.B) {
			e := newEngine(b)
			seed(b, e, b.N, 100, false)
			cost := readRedisCost(b, e.Client())
			b.ResetTimer()
			consumeAckFetch(b, e, consumers, 5, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			cost.report(b, e.Client(), b.N)
		})
	}
}

// consumeAckFetch processes tasks tasks with consumers consumers, each acking its last batch and
// fetching the next (up to prefetch) in one AckFetch call.
func consumeAckFetch(b *testing.B, e *engine.Engine, consumers, prefetch, tasks int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	left := tasks
	// claim reserves up to prefetch of the tasks not yet claimed by any consumer.
	claim := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := min(prefetch, left)
		left -= n
		return n
	}
	unclaim := func(n int) {
		mu.Lock()
		left += n
		mu.Unlock()
	}
	errs := make(chan error, consumers)
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("bench-%d", c)
			var rs []engine.Receipt
			for {
				want := claim()
				if want == 0 {
					if len(rs) > 0 {
						if _, err := e.Ack(ctx, rs); err != nil {
							errs <- err
						}
					}
					return
				}
				_, ds, _, err := e.AckFetch(ctx, rs, name, want, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				unclaim(want - len(ds))
				rs = rs[:0]
				for i := range ds {
					rs = append(rs, ds[i].Receipt())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
