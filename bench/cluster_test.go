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
	"github.com/srqueue/srq/internal/redistest"
)

// BenchmarkClusterShards runs the typed queue end to end (4 producers publishing batches of 100
// over 10,000 partitions, a quarter of them ordered, while 2 workers of 32 handlers consume) on a
// local 3-master Redis Cluster, with the queue in 1 shard (one master does all the work) and in 3
// shards (one per master). It reports tasks/s and, per master, its share of the script time
// (EVALSHA µs from INFO commandstats), the script µs and the masters' CPU µs per task over the
// whole cluster, and the ceiling: tasks/s at which the busiest master would saturate its own core
// (tasks over that master's CPU time). On a machine with fewer cores than masters the client and
// the masters share the CPU, so the throughput says little about a real cluster; the CPU per task,
// its spread and the ceiling do.
func BenchmarkClusterShards(b *testing.B) {
	cl := redistest.StartClusterWith(b, redistest.ClusterOptions{Replicas: -1})
	for _, shards := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards-%d", shards), func(b *testing.B) { benchClusterShards(b, cl, shards) })
	}
}

func benchClusterShards(b *testing.B, cl *redistest.Cluster, shards int) {
	ctx := context.Background()
	c := cl.Client(b)
	q, err := srq.NewQueue[[]byte](c, srq.QueueConfig{Name: redistest.Queue(b), Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, e := range q.Shards() {
			for _, addr := range cl.Masters() {
				if err := redistest.DropKeys(ctx, cl.Admin(addr), e.Keys().Base()); err != nil {
					b.Error(err)
				}
			}
		}
	})
	var done atomic.Int64
	total := int64(b.N)
	finished := make(chan struct{})
	h := srq.HandlerFunc[[]byte](func(context.Context, *srq.Task[[]byte]) error {
		if done.Add(1) == total {
			close(finished)
		}
		return nil
	})
	before, err := cl.CommandStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for i := 0; i < 2; i++ {
		w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 32, Logger: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := w.Run(runCtx); err != nil {
				b.Error(err)
			}
		}()
	}
	const producers, batch, parts = 4, 100, 10000
	var pubs sync.WaitGroup
	for p := 0; p < producers; p++ {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for i := p * batch; i < b.N; i += producers * batch {
				msgs := make([]srq.Message[[]byte], 0, batch)
				for j := i; j < min(i+batch, b.N); j++ {
					key := j % parts
					msgs = append(msgs, srq.Message[[]byte]{Value: payload20,
						Opts: srq.PublishOpts{Partition: fmt.Sprint(key), Ordered: key%4 == 0}})
				}
				if _, err := q.PublishBatch(ctx, msgs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	pubs.Wait()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		b.Errorf("only %d of %d tasks done", done.Load(), total)
	}
	b.StopTimer()
	stop()
	workers.Wait()
	after, err := cl.CommandStats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var usec [8]int64
	var sum, calls, cpu, busiest int64
	for i := range after {
		usec[i] = after[i].Total("evalsha", "eval", "fcall", "fcall_ro").Usec - before[i].Total("evalsha", "eval", "fcall", "fcall_ro").Usec
		calls += after[i].Total("evalsha", "eval", "fcall", "fcall_ro").Calls - before[i].Total("evalsha", "eval", "fcall", "fcall_ro").Calls
		sum += usec[i]
		c := after[i].CPUUsec - before[i].CPUUsec
		cpu += c
		busiest = max(busiest, c)
	}
	b.ReportMetric(float64(calls)/float64(b.N), "scripts/task")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	b.ReportMetric(float64(sum)/float64(b.N), "script-µs/task")
	b.ReportMetric(float64(cpu)/float64(b.N), "redis-cpu-µs/task")
	// The rate at which the busiest master would run out of its own core, were each master on a
	// machine of its own: the Redis-bound ceiling of this layout (docs/scaling.md).
	b.ReportMetric(float64(b.N)/(float64(max(busiest, 1))/1e6), "ceiling-tasks/s")
	for i := range after {
		b.ReportMetric(100*float64(usec[i])/float64(max(sum, 1)), fmt.Sprintf("master%d-%%", i))
	}
}

// quietLog drops the workers' logs, which would otherwise interleave with the benchmark's output.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))
