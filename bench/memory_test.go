package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// BenchmarkMemoryPerTask publishes 100,000 tasks of a 20-byte payload with a Queue's default max
// attempts, in batches of 1,000, and reports Redis's used_memory growth per pending task
// (B/task): all in one partition, over 10,000 ordered partitions (10 each), and one partition per
// task. b.N is ignored: the figure is per task of the 100,000. Each case runs on a redis-server of
// its own, so the figure holds the growth of its keyspace's hash table, whatever ran before, and
// its queue's name has 8 characters, a real queue's length (the test names the other benchmarks
// use as queue names, 50 characters and more, would add their bytes to each task's keys).
func BenchmarkMemoryPerTask(b *testing.B) {
	for _, c := range []struct {
		name string
		part func(i int) partition.Key
	}{
		{"one-partition", func(int) partition.Key { return "p" }},
		{"ordered-10000", func(i int) partition.Key { return partition.Ordered(strconv.Itoa(i % 10000)) }},
		{"partition-per-task", func(i int) partition.Key { return partition.Key(strconv.Itoa(i)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := redistest.StartReal(b, "measures the used_memory of a server of its own")
			e, err := engine.New(srv.Client(b), engine.Config{Queue: "memqueue"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			before := usedMemory(b, e)
			const n = 100_000
			for i := 0; i < n; i += 1000 {
				msgs := make([]engine.Message, 0, 1000)
				for j := i; j < i+1000; j++ {
					msgs = append(msgs, engine.Message{Partition: c.part(j), Payload: payload20, MaxAttempts: 25})
				}
				if _, err := e.Publish(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(usedMemory(b, e)-before)/n, "B/task")
		})
	}
}

// usedMemory returns the used_memory field of the INFO of e's Redis.
func usedMemory(b *testing.B, e *engine.Engine) int64 {
	b.Helper()
	info, err := e.Client().Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("INFO memory has no used_memory")
	return 0
}
