package bench

import (
	"fmt"
	"testing"
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
// runs, defining the helpers and building KEYS and ARGV (docs/benchmarks.md, section 6.1).
func BenchmarkAckFetchBatchSize(b *testing.B) {
	for _, n := range []int{1, 5, 25, 100} {
		b.Run(fmt.Sprintf("n-%d", n), func(b *testing.B) { benchConsume(b, 1, n, true) })
	}
}
