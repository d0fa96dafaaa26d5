package bench

// Benchmarks with the same meaning as the baseline library's (smart-redis-queue), so figures
// compare: publish one task, a batch of 10 or 100; consume (fetch + ack) with one consumer at
// several prefetch sizes and with several consumers; and consume over 10 to 1,000,000 partitions.
// They run on the engine, as the baseline's run on its byte-level API.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

var payload20 = []byte("twenty bytes payload")

// newEngine returns an engine on a fresh queue of the benchmark Redis; its keys are removed after.
func newEngine(b *testing.B) *engine.Engine { return newEngineWith(b, engine.Config{}) }

// newEngineWith is newEngine with cfg (its Queue is filled in).
func newEngineWith(b *testing.B, cfg engine.Config) *engine.Engine {
	b.Helper()
	c := redistest.Client(b)
	cfg.Queue = redistest.Queue(b)
	e, err := engine.New(c, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dropQueue(b, e) })
	return e
}

// dropQueue deletes the keys of e's queue.
func dropQueue(b *testing.B, e *engine.Engine) {
	if err := redistest.DropKeys(context.Background(), e.Client(), e.Keys().Base()); err != nil {
		b.Error(err)
	}
}

// seed publishes n tasks spread over parts partitions (ordered or not), in batches of 1000.
func seed(b *testing.B, e *engine.Engine, n, parts int, ordered bool) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		msgs := make([]engine.Message, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			p := partition.Key(fmt.Sprint(j % parts))
			if ordered {
				p = partition.Ordered(string(p))
			}
			msgs = append(msgs, engine.Message{Partition: p, Payload: payload20})
		}
		if _, err := e.Publish(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPublish publishes b.N calls of batch tasks each, spread over nparts unordered partitions in
// turn.
func benchPublish(b *testing.B, batch, nparts int) {
	e := newEngine(b)
	ctx := context.Background()
	msgs := make([]engine.Message, batch)
	parts := make([]partition.Key, nparts)
	for i := range parts {
		parts[i] = partition.Key(strconv.Itoa(i))
	}
	cost := startCost(b, e.Client())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range msgs {
			msgs[j] = engine.Message{Partition: parts[(i*batch+j)%nparts], Payload: payload20}
		}
		if _, err := e.Publish(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, e.Client(), b.N*batch)
}

// BenchmarkPublish publishes one task per call (ns per task) to one partition: the shape of the
// peers' benchmarks, whose tasks all go to one queue (asynq, BullMQ) or one partition (the seed).
func BenchmarkPublish(b *testing.B) { benchPublish(b, 1, 1) }

// BenchmarkPublishBatch10 publishes batches of 10 (ns per batch) to one partition.
func BenchmarkPublishBatch10(b *testing.B) { benchPublish(b, 10, 1) }

// BenchmarkPublishBatch100 publishes batches of 100 (ns per batch) to one partition.
func BenchmarkPublishBatch100(b *testing.B) { benchPublish(b, 100, 1) }

// BenchmarkPublishSpread publishes one task per call (ns per task), the tasks over 100 partitions
// in turn.
func BenchmarkPublishSpread(b *testing.B) { benchPublish(b, 1, 100) }

// BenchmarkPublishBatch100Spread publishes batches of 100 (ns per batch), each task to the next of
// 100 partitions: every batch writes to all of them.
func BenchmarkPublishBatch100Spread(b *testing.B) { benchPublish(b, 100, 100) }

// consume runs fetch(prefetch) + ack with consumers consumers until tasks tasks are done. Each
// consumer acks its last batch and fetches the next: with ackFetch in one AckFetch call, else with
// Ack and then Fetch, the baseline's two calls.
func consume(b *testing.B, e *engine.Engine, consumers, prefetch, tasks int, ackFetch bool) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	left := tasks // not yet fetched by any consumer
	claim := func(delta int) {
		mu.Lock()
		left -= delta
		mu.Unlock()
	}
	errs := make(chan error, consumers)
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("bench-%d", c)
			var rs []engine.Receipt // the last batch, to ack
			for {
				mu.Lock()
				want := min(prefetch, left)
				left -= want
				mu.Unlock()
				var ds []engine.Delivery
				var err error
				switch {
				case want <= 0:
					if len(rs) > 0 {
						_, err = e.Ack(ctx, rs)
					}
				case ackFetch:
					_, ds, _, err = e.AckFetch(ctx, rs, name, want, time.Minute)
				default:
					if len(rs) > 0 {
						_, err = e.Ack(ctx, rs)
					}
					if err == nil {
						ds, err = e.Fetch(ctx, name, want, time.Minute)
					}
				}
				if err != nil {
					errs <- err
					return
				}
				if want <= 0 {
					return
				}
				claim(len(ds) - want) // what this fetch did not find goes back
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

// benchConsume runs consume over 100 unordered partitions; ns per task.
func benchConsume(b *testing.B, consumers, prefetch int, ackFetch bool) {
	benchConsumeWith(b, engine.Config{}, consumers, prefetch, ackFetch)
}

// benchConsumeWith is benchConsume on an engine configured with cfg.
func benchConsumeWith(b *testing.B, cfg engine.Config, consumers, prefetch int, ackFetch bool) {
	e := newEngineWith(b, cfg)
	seed(b, e, b.N, 100, false)
	cost := startCost(b, e.Client())
	b.ResetTimer()
	consume(b, e, consumers, prefetch, b.N, ackFetch)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, e.Client(), b.N)
}

// BenchmarkConsume: one consumer, fetches of 10 (the worker's default concurrency), ns per task.
func BenchmarkConsume(b *testing.B) { benchConsume(b, 1, 10, false) }

// BenchmarkConsumePrefetch: one consumer fetching 1 or 5 tasks per call.
func BenchmarkConsumePrefetch(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("prefetch-%d", n), func(b *testing.B) { benchConsume(b, 1, n, false) })
	}
}

// BenchmarkConsumeParallel: 2 or 8 consumers fetching 5 each; wall time per task for the group.
func BenchmarkConsumeParallel(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprintf("consumers-%d", n), func(b *testing.B) { benchConsume(b, n, 5, false) })
	}
}

// BenchmarkConsumePartitions: 8 consumers fetching 5 each over 10 to 1,000,000 partitions,
// ordered and unordered. The queue holds max(b.N, partitions) tasks so every partition has work.
func BenchmarkConsumePartitions(b *testing.B) {
	for _, ordered := range []bool{true, false} {
		name := "unordered"
		if ordered {
			name = "ordered"
		}
		b.Run(name, func(b *testing.B) {
			for _, parts := range []int{10, 1000, 100_000, 1_000_000} {
				b.Run(fmt.Sprintf("partitions-%d", parts), func(b *testing.B) {
					e := newEngine(b)
					total := max(b.N, parts)
					seed(b, e, total, parts, ordered)
					cost := startCost(b, e.Client())
					b.ResetTimer()
					consume(b, e, 8, 5, b.N, false)
					b.StopTimer()
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
					cost.report(b, e.Client(), b.N)
				})
			}
		})
	}
}

// BenchmarkConsumePartitionsInterleaved runs ConsumePartitions' 8 consumers of 5 over 10 and over
// 1,000,000 partitions, ordered and unordered, in alternating blocks of 2,000 tasks in one process,
// so that the machine's drift, which moves a pair of separate runs by more than the ratio they are
// to show, hits both sides alike. It reports each side's tasks/s and their ratio (big/small, the
// target being at least 0.9).
func BenchmarkConsumePartitionsInterleaved(b *testing.B) {
	const block, bigParts = 2000, 1_000_000
	for _, ordered := range []bool{false, true} {
		name := "unordered"
		if ordered {
			name = "ordered"
		}
		b.Run(name, func(b *testing.B) {
			small, big := newEngine(b), newEngine(b)
			seed(b, small, b.N, 10, ordered)
			seed(b, big, max(b.N, bigParts), bigParts, ordered)
			var tSmall, tBig time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += block {
				n := min(block, b.N-done)
				start := time.Now()
				consume(b, small, 8, 5, n, false)
				mid := time.Now()
				consume(b, big, 8, 5, n, false)
				tSmall, tBig = tSmall+mid.Sub(start), tBig+time.Since(mid)
			}
			b.StopTimer()
			rateSmall, rateBig := float64(b.N)/tSmall.Seconds(), float64(b.N)/tBig.Seconds()
			b.ReportMetric(rateSmall, "tasks/s-10")
			b.ReportMetric(rateBig, "tasks/s-1000000")
			b.ReportMetric(rateBig/rateSmall, "ratio")
		})
	}
}
