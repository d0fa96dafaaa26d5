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
