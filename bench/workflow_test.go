package bench

// What a dynamic workflow costs: a parent task that spawns 10,000 children and waits for them,
// beside the same number of plain tasks published in batches and consumed by the same worker.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

const (
	// workflowChildren is how many children the parent of BenchmarkWorkflowChildren spawns.
	workflowChildren = 10_000
	// spawnBatch is how many children one SpawnBatch call spawns, and how many plain tasks one
	// PublishBatch call publishes.
	spawnBatch = 1_000
)

// node is the payload of BenchmarkWorkflowChildren: the parent, or a child (its result is I).
type node struct {
	Parent bool
	I      int
}

// BenchmarkWorkflowChildren runs, per op, a parent that spawns 10,000 children (SpawnBatch, 1,000
// a call), waits for them (WaitChildren), then reads their results (ChildResults) and completes,
// on one worker of 8 handlers with its default prefetch; the children return their index as
// their result. "same-queue" spawns them to the parent's own queue, "other-queue" to a second
// queue the same worker serves, so each child's end reaches the parent through the relay. ns/op
// is the workflow from the parent's publish to its completion. It reports:
//
//   - resume-ms: from the last child's ack (its outcome's end time, by the Redis server's clock on
//     this machine) to the start of the parent's next run;
//   - redis-cpu-µs/child, evals/child and redis-calls/child: what Redis spent on the workflow (its
//     main thread's CPU, script calls and the commands they ran) divided by the children;
//   - redis-cpu-µs/task-plain, evals/task-plain: the same for 10,000 plain tasks published 1,000
//     a call and consumed by a worker of the same configuration, in the same op (not timed).
func BenchmarkWorkflowChildren(b *testing.B) {
	for _, other := range []bool{false, true} {
		name := "same-queue"
		if other {
			name = "other-queue"
		}
		b.Run(name, func(b *testing.B) { benchWorkflow(b, other) })
	}
}

func benchWorkflow(b *testing.B, otherQueue bool) {
	ctx := context.Background()
	c := redistest.Client(b)
	newQueue := func(suffix string) *srq.Queue[node] {
		q, err := srq.NewQueue[node](c, srq.QueueConfig{Name: redistest.Queue(b) + suffix})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dropQueue(b, q.Engine()) })
		return q
	}
	parents, kids, plain := newQueue("-p"), newQueue("-c"), newQueue("-plain")
	if !otherQueue {
		kids = parents
	}
	cfg := srq.WorkerConfig{Concurrency: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	resumed := make(chan time.Time, 1)
	h := srq.HandlerFunc[node](func(ctx context.Context, t *srq.Task[node]) error {
		start := time.Now()
		if !t.Value.Parent {
			return t.SetResult(t.Value.I)
		}
		spawned, _, err := srq.State[bool](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if !spawned {
			batch := make([]srq.Spawned[node], 0, spawnBatch)
			for i := range workflowChildren {
				batch = append(batch, srq.Spawned[node]{Name: fmt.Sprint(i), Value: node{I: i}})
				if len(batch) == spawnBatch {
					if _, err := srq.SpawnBatch(ctx, t.Delivery, kids, batch); err != nil {
						return err
					}
					batch = batch[:0]
				}
			}
			if err := t.SetState(true); err != nil {
				return err
			}
			return srq.WaitChildren()
		}
		select {
		case resumed <- start:
		default:
		}
		got, err := srq.ChildResults[int](ctx, t.Delivery)
		if err != nil {
			return srq.Permanent(err)
		}
		sum := 0
		for _, v := range got {
			sum += v
		}
		if len(got) != workflowChildren || sum != workflowChildren*(workflowChildren-1)/2 {
			return srq.Permanent(fmt.Errorf("%d results summing to %d", len(got), sum))
		}
		return t.SetResult(sum)
	})

	// run runs a worker of cfg over qs until body returns, then stops it, so that its last acks
	// are in.
	run := func(body func(), qs ...*srq.Queue[node]) {
		var served []srq.Served
		for _, q := range qs {
			served = append(served, srq.Serve(q, h, nil))
		}
		w, err := srq.NewWorkerOf(cfg, served...)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(wctx) }()
		body()
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
	}
	workers := []*srq.Queue[node]{parents}
	if otherQueue {
		workers = append(workers, kids)
	}

	type cost struct {
		cpu, evals, calls int64
		byCmd             map[string][2]int64
	}
	var resume time.Duration
	wf, pl := cost{byCmd: map[string][2]int64{}}, cost{byCmd: map[string][2]int64{}}
	add := func(sum *cost, from, to redisCost) {
		sum.cpu += to.cpuUsec - from.cpuUsec
		sum.evals += to.scripts - from.scripts
		sum.calls += to.innerCalls - from.innerCalls
		for name, v := range to.byCmd {
			w := from.byCmd[name]
			d := sum.byCmd[name]
			sum.byCmd[name] = [2]int64{d[0] + v[0] - w[0], d[1] + v[1] - w[1]}
		}
	}
	b.ResetTimer()
	for i := range b.N {
		// The plain tasks, untimed.
		b.StopTimer()
		var done atomic.Int64
		all := make(chan struct{})
		hp := srq.HandlerFunc[node](func(context.Context, *srq.Task[node]) error {
			if done.Add(1) == workflowChildren {
				close(all)
			}
			return nil
		})
		from := startCost(b, c)
		for j := 0; j < workflowChildren; j += spawnBatch {
			msgs := make([]srq.Message[node], spawnBatch)
			for k := range msgs {
				msgs[k] = srq.Message[node]{Value: node{I: j + k}}
			}
			if _, err := plain.PublishBatch(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		w, err := srq.NewWorker(plain, hp, cfg)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(wctx) }()
		select {
		case <-all:
		case <-time.After(5 * time.Minute):
			b.Fatalf("plain: %d of %d tasks ran", done.Load(), workflowChildren)
		}
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		add(&pl, from, readRedisCost(b, c))

		// The workflow, timed.
		id := fmt.Sprint("parent-", i)
		from = startCost(b, c)
		b.StartTimer()
		run(func() {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			if _, err := srq.PublishAndWait[int](rctx, parents, node{Parent: true}, &srq.PublishOpts{ID: id}); err != nil {
				b.Fatal(err)
			}
		}, workers...)
		b.StopTimer()
		add(&wf, from, readRedisCost(b, c))
		start := <-resumed
		last, err := lastChildEnded(ctx, kids, id)
		if err != nil {
			b.Fatal(err)
		}
		resume += start.Sub(last)
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	per := n * workflowChildren
	b.ReportMetric(float64(resume.Microseconds())/1000/n, "resume-ms")
	b.ReportMetric(float64(wf.cpu)/per, "redis-cpu-µs/child")
	b.ReportMetric(float64(wf.evals)/per, "evals/child")
	b.ReportMetric(float64(wf.calls)/per, "redis-calls/child")
	b.ReportMetric(float64(pl.cpu)/per, "redis-cpu-µs/task-plain")
	b.ReportMetric(float64(pl.evals)/per, "evals/task-plain")
	b.ReportMetric(float64(pl.calls)/per, "redis-calls/task-plain")
	if testing.Verbose() {
		for _, c := range []struct {
			name string
			cost
		}{{"child", wf}, {"plain task", pl}} {
			type row struct {
				name        string
				calls, usec int64
			}
			var rows []row
			for name, v := range c.byCmd {
				if v[0] > 0 && name != "info" {
					rows = append(rows, row{name, v[0], v[1]})
				}
			}
			slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.usec, a.usec) })
			var sb strings.Builder
			for _, r := range rows {
				fmt.Fprintf(&sb, " %s=%.2f/%.2fµs", r.name, float64(r.calls)/per, float64(r.usec)/per)
			}
			b.Logf("per %s, calls/Redis µs by command:%s", c.name, sb.String())
		}
	}
}

// lastChildEnded returns when the child of parent id that ended last ended, by its kept outcome:
// q lists its kept outcomes latest first among those kept equally long (every child's is), and
// the parent's own (kept for its caller) is skipped.
func lastChildEnded(ctx context.Context, q *srq.Queue[node], id string) (time.Time, error) {
	page, err := q.Engine().Outcomes(ctx, engine.OutcomeCursor{}, 10)
	if err != nil {
		return time.Time{}, err
	}
	for _, o := range page.Outcomes {
		if strings.HasPrefix(o.ID, id+"/") {
			return o.Ended, nil
		}
	}
	return time.Time{}, errors.New("no kept outcome of a child of " + id)
}
