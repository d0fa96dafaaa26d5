package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// BenchmarkPublishDebounced compares a debounced publish with a plain one, one task per call over
// 100 partitions (ns per publish): plain; a debounce that adds a task (a key of its own each
// time); a debounce that replaces the pending task of its key (100 keys, one per partition); a
// throttle that drops (100 keys, each holding a task for the whole run).
func BenchmarkPublishDebounced(b *testing.B) {
	parts := make([]partition.Key, 100)
	for i := range parts {
		parts[i] = partition.Key(strconv.Itoa(i))
	}
	for _, c := range []struct {
		name string
		msg  func(i int) engine.Message
	}{
		{"plain", func(i int) engine.Message { return engine.Message{Partition: parts[i%100], Payload: payload20} }},
		{"debounce-add", func(i int) engine.Message {
			return engine.Message{Partition: parts[i%100], Payload: payload20,
				Debounce: &engine.Debounce{Key: "k" + strconv.Itoa(i), Window: time.Hour}}
		}},
		{"debounce-replace", func(i int) engine.Message {
			return engine.Message{Partition: parts[i%100], Payload: payload20,
				Debounce: &engine.Debounce{Key: "k" + strconv.Itoa(i%100), Window: time.Hour}}
		}},
		{"throttle-drop", func(i int) engine.Message {
			return engine.Message{Partition: parts[i%100], Payload: payload20,
				Debounce: &engine.Debounce{Key: "k" + strconv.Itoa(i%100), Window: time.Hour, Mode: engine.Throttle}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEngine(b)
			ctx := context.Background()
			// The keys of the replace and drop cases hold a task before the clock starts.
			for i := range 100 {
				if c.name != "plain" && c.name != "debounce-add" {
					if _, err := e.Publish(ctx, []engine.Message{c.msg(i)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			msgs := make([]engine.Message, 1)
			cost := startCost(b, e.Client())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				msgs[0] = c.msg(i)
				if _, err := e.Publish(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
			cost.report(b, e.Client(), b.N)
		})
	}
}
