package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// BenchmarkConsumeAckFetch is BenchmarkConsumePrefetch/prefetch-5 and
// BenchmarkConsumeParallel/consumers-8 with each ack and the next fetch sent as one AckFetch call
// (one round trip and one script per batch instead of two); ns per task.
func BenchmarkConsumeAckFetch(b *testing.B) {
	for _, consumers := range []int{1, 8} {
		b.Run(fmt.Sprintf("consumers-%d", consumers), func(b *testing.B) { benchConsume(b, consumers, 5, true) })
	}
}

// BenchmarkAckFetchBatchSize runs one consumer with AckFetch calls of 1, 5, 25 and 100 tasks over
// 100 unordered partitions; ns per task. The script time per task is a call's fixed cost ÷ n plus
// a task's own cost, so the sizes tell the two apart: the fixed part is the commands every call
// runs, defining the helpers and building KEYS and ARGV.
func BenchmarkAckFetchBatchSize(b *testing.B) {
	for _, n := range []int{1, 5, 25, 100} {
		b.Run(fmt.Sprintf("n-%d", n), func(b *testing.B) { benchConsume(b, 1, n, true) })
	}
}

// BenchmarkConsumeMerge runs 8 consumers of 5 tasks a call, as ConsumeParallel/consumers-8 (Ack,
// then Fetch) and ConsumeAckFetch/consumers-8 (one AckFetch) do, on an engine that sends every
// call alone (MaxMerge 1) and on one that merges concurrent calls (the default), side by side in
// one run: on a machine whose speed drifts, compare the two within a round and alternate rounds
// with -count.
func BenchmarkConsumeMerge(b *testing.B) {
	for _, calls := range []struct {
		name     string
		ackFetch bool
	}{{"ack-then-fetch", false}, {"ackfetch", true}} {
		for _, merge := range []struct {
			name string
			max  int
		}{{"alone", 1}, {"merged", engine.DefaultMaxMerge}} {
			b.Run(calls.name+"/"+merge.name, func(b *testing.B) {
				benchConsumeWith(b, engine.Config{MaxMerge: merge.max}, 8, 5, calls.ackFetch)
			})
		}
	}
}

// BenchmarkPublishMerge runs 8 producers publishing one task per call at once, on an engine that
// sends every call alone (MaxMerge 1) and on one that merges concurrent publishes (the default),
// side by side in one run; ns per task for the group.
func BenchmarkPublishMerge(b *testing.B) {
	for _, merge := range []struct {
		name string
		max  int
	}{{"alone", 1}, {"merged", engine.DefaultMaxMerge}} {
		for _, producers := range []int{8, 64} {
			b.Run(fmt.Sprintf("%s/producers-%d", merge.name, producers), func(b *testing.B) {
				e := newEngineWith(b, engine.Config{MaxMerge: merge.max})
				ctx := context.Background()
				var next atomic.Int64
				cost := startCost(b, e.Client())
				b.ResetTimer()
				var g errgroup.Group
				for range producers {
					g.Go(func() error {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return nil
							}
							msg := engine.Message{Partition: partition.Key(strconv.FormatInt(i%100, 10)), Payload: payload20}
							if _, err := e.Publish(ctx, []engine.Message{msg}); err != nil {
								return err
							}
						}
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
				cost.report(b, e.Client(), b.N)
			})
		}
	}
}
