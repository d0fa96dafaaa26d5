package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

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
			c := redistest.Client(b)
			q, err := srq.NewQueue[payload](c, srq.QueueConfig{Name: redistest.Queue(b)})
			if err != nil {
				b.Fatal(err)
			}
			var done atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			h := srq.HandlerFunc[payload](func(context.Context, *srq.Task[payload]) error {
				if done.Add(1) == n {
					close(all)
				}
				return nil
			})
			w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 8,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			cost := startCost(b, c)
			b.ResetTimer()
			go func() { ran <- w.Run(ctx) }()
			for i := 0; i < b.N; i += 100 {
				batch := make([]srq.Message[payload], 0, 100)
				for j := i; j < min(i+100, b.N); j++ {
					o := srq.PublishOpts{Partition: fmt.Sprint(j % 1000), Ordered: ordered}
					batch = append(batch, srq.Message[payload]{Value: payload{User: o.Partition, Seq: j, Body: "twenty bytes of body"}, Opts: o})
				}
				if _, err := q.PublishBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("processed %d of %d", done.Load(), n)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			cost.report(b, c, b.N)
			cancel()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
			if _, err := c.Del(context.Background(), q.Engine().Keys().Stats(), q.Engine().Keys().Seq(),
				q.Engine().Keys().Wake()).Result(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
