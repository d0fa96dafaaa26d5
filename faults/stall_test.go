package faults_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/srqtest/history"
)

// TestStalledWorkerIsFenced: worker process A holds the first task X of an ordered partition when
// it is stopped with SIGSTOP. Its lease expires, worker B recovers X and runs it (and holds it
// until the test says so). Then A is resumed: its handler returns success late, and A's ack (and
// its lease extension, when the extender ticks first) must be refused with ErrStaleToken, leaving
// X leased to B. B then completes X and the rest of the partition in order; the history must show
// X completed once (A's late completion is fenced), no overlap, nothing lost.
func TestStalledWorkerIsFenced(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, 2*time.Minute)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "stalled"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	rec := history.NewRecorder("test", nil)
	var msgs []srq.Message[task]
	for i := 0; i < 4; i++ {
		msgs = append(msgs, srq.Message[task]{Value: task{N: i}, Opts: srq.PublishOpts{ID: fmt.Sprint("x", i), Partition: "s", Ordered: true}})
	}
	if err := (&producer{name: "p", q: q, rec: rec, batch: 10}).run(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	const leaseA = time.Second
	a := startHelper(t, dir, helperConfig{Mode: "stall", Addr: srv.Addr, Queue: q.Name(), Process: "A",
		History: filepath.Join(dir, "A.jsonl"), Lease: leaseA, Concurrency: 1, Prefetch: -1})
	var held string
	select {
	case held = <-a.lines:
	case <-time.After(30 * time.Second):
		t.Fatal("worker A did not start the first task")
	}
	var tokenA uint64
	if _, err := fmt.Sscanf(held, "holding x0 %d", &tokenA); err != nil {
		t.Fatalf("worker A says %q: %v", held, err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// B recovers X once A's lease has expired, and holds it.
	bHolds := make(chan struct{})
	releaseB := make(chan struct{})
	hb := srq.HandlerFunc[task](func(hctx context.Context, t *srq.Task[task]) error {
		if t.ID == "x0" {
			close(bHolds)
			select {
			case <-releaseB:
			case <-hctx.Done():
				return context.Cause(hctx)
			}
		}
		return nil
	})
	b, err := srq.NewWorker(q, hb, srq.WorkerConfig{Concurrency: 2, Lease: 20 * time.Second, ConsumerID: "B",
		RecoverInterval: 50 * time.Millisecond, Logger: quiet, Middleware: []srq.Middleware{rec.Middleware("B")}})
	if err != nil {
		t.Fatal(err)
	}
	stopB := runWorker(t, b, 30*time.Second)
	select {
	case <-bHolds:
	case <-time.After(30 * time.Second):
		t.Fatal("worker B did not get the stalled task")
	}
	ti, err := eng.Task(ctx, "x0")
	if err != nil || ti.Consumer != "B" || uint64(ti.Token) <= tokenA {
		t.Fatalf("x0 is %+v, %v; want it leased to B with a token above A's %d", ti, err, tokenA)
	}

	// A wakes up past its lease, finishes late and acks.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(30 * time.Second); err != nil {
		t.Fatalf("worker A: %v", err)
	}
	refused := a.logs("ack refused")
	if len(refused) != 1 || !strings.Contains(refused[0], engine.ErrStaleToken.Error()) {
		t.Errorf("worker A's late ack: log %q, want one refusal with %q", refused, engine.ErrStaleToken)
	}
	after, err := eng.Task(ctx, "x0")
	if err != nil || after.Consumer != "B" || after.Token != ti.Token {
		t.Fatalf("after A's late ack x0 is %+v, %v; want it still leased to B (token %d)", after, err, ti.Token)
	}
	aEvents := readHistory(t, filepath.Join(dir, "A.jsonl"))
	if len(aEvents) != 2 || !aEvents[1].Late || !aEvents[1].OK {
		t.Fatalf("A's history %+v: want one execution of x0 ending late", aEvents)
	}
	t.Logf("A's handler context ended with: %s", aEvents[1].Err)
	if !strings.Contains(aEvents[1].Err, srq.ErrLeaseLost.Error()) {
		t.Errorf("A's context ended with %q, want %q", aEvents[1].Err, srq.ErrLeaseLost)
	}

	close(releaseB)
	waitUntil(t, "B to run the partition", 30*time.Second, func() bool { return drained(ctx, eng) })
	stopB()
	events := append(rec.Events(), aEvents...)
	r := check(t, events)
	if r.Late != 1 || r.Completed != len(msgs) {
		t.Errorf("late %d, completed %d; want 1 and %d", r.Late, r.Completed, len(msgs))
	}
	definite := 0
	for _, e := range events {
		if e.Op == history.OpEnd && e.ID == "x0" && e.OK && !e.Late {
			definite++
			if e.Process != "test" {
				t.Errorf("x0 completed by %s, want B (of process test)", e.Process)
			}
		}
	}
	if definite != 1 {
		t.Errorf("x0 completed %d times in time, want once (by B)", definite)
	}
	if s, _ := stats(ctx, eng); s.Acked != int64(len(msgs)) {
		t.Errorf("acked %d, want %d", s.Acked, len(msgs))
	}
}

// TestStalledWorkerStartsNoExpiredLease: worker process A (concurrency 4, prefetch 16, lease 1 s)
// holds a task in each of its handlers and 16 more fetched ahead, over ordered partitions, when it
// is stopped with SIGSTOP. Worker B recovers A's tasks once A's leases expire and works through
// the partitions. A is resumed once it holds no lease any more: its handlers return late, each
// as its task's lease timer ends its context, and take the next tasks, which A fetched before the
// stop and whose leases ended long ago (on the unfixed worker, each handler raced the other tasks'
// timers and sometimes started one). None may start; A goes on with tasks it fetches anew. Both workers check each lease in Redis as a handler starts
// (history.LeaseMiddleware), so the history holds every start to its lease: no execution may start
// without a valid lease (Expired), none of an ordered partition may run while another runs with a
// valid lease (Overlap), and nothing may be lost or run twice.
func TestStalledWorkerStartsNoExpiredLease(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, 2*time.Minute)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "resumed"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	rec := history.NewRecorder("test", nil)
	// The held tasks first, so A reaches them in its first fetch; then ordered partitions long
	// enough that B still works through them when A resumes, and unordered tasks, enough for A to
	// fill its free slots with while it holds the ordered partitions.
	const concurrencyA, prefetchA = 4, 16
	var msgs []srq.Message[task]
	for i := 0; i < concurrencyA; i++ {
		msgs = append(msgs, srq.Message[task]{Opts: srq.PublishOpts{ID: fmt.Sprint("hold", i), Partition: "h"}})
	}
	for i := 0; i < 90; i++ {
		msgs = append(msgs, srq.Message[task]{Value: task{N: i}, Opts: srq.PublishOpts{ID: fmt.Sprint("o", i),
			Partition: fmt.Sprint("o", i%3), Ordered: true}})
	}
	for i := 0; i < 60; i++ {
		msgs = append(msgs, srq.Message[task]{Value: task{N: i}, Opts: srq.PublishOpts{ID: fmt.Sprint("u", i),
			Partition: fmt.Sprint("u", i%6)}})
	}
	if err := (&producer{name: "p", q: q, rec: rec, batch: 100}).run(ctx, msgs); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	historyA := filepath.Join(dir, "A.jsonl")
	a := startHelper(t, dir, helperConfig{Mode: "hold", Hold: "hold", CheckLeases: true, Addr: srv.Addr,
		Queue: q.Name(), Process: "A", History: historyA, Lease: time.Second,
		Concurrency: concurrencyA, Prefetch: prefetchA, Work: 5 * time.Millisecond})
	for range concurrencyA {
		select {
		case held := <-a.lines:
			if !strings.HasPrefix(held, "holding hold") {
				t.Fatalf("worker A says %q", held)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("worker A did not start the held tasks")
		}
	}
	// A's handlers hold a task each; its fetchers fill the other slots. It is stopped once it
	// holds the held tasks and as many it has not started, and no ack is on its way: the tasks A
	// ran must not run again.
	waitUntil(t, "worker A to fetch ahead", 30*time.Second, func() bool {
		leases, _, err := eng.InFlight(ctx, 0, engine.MaxInspectPage)
		if err != nil || len(leases) != concurrencyA+prefetchA {
			return false
		}
		started := map[string]bool{}
		for _, e := range readHistory(t, historyA) {
			started[e.ID] = started[e.ID] || e.Op == history.OpStart
		}
		for _, l := range leases {
			if l.Consumer != "A" || !strings.HasPrefix(l.ID, "hold") && started[l.ID] {
				return false
			}
		}
		return true
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()

	b, err := srq.NewWorker(q, work(10*time.Millisecond), srq.WorkerConfig{Concurrency: 2, Lease: 20 * time.Second,
		ConsumerID: "B", RecoverInterval: 50 * time.Millisecond, Logger: quiet,
		Middleware: []srq.Middleware{rec.LeaseMiddleware("B", history.RedisLease(q.ShardOf))}})
	if err != nil {
		t.Fatal(err)
	}
	stopB := runWorker(t, b, 30*time.Second)
	waitUntil(t, "A's leases to be taken back", 30*time.Second, func() bool {
		leases, _, err := eng.InFlight(ctx, 0, engine.MaxInspectPage)
		if err != nil {
			return false
		}
		for _, l := range leases {
			if l.Consumer == "A" {
				return false
			}
		}
		return true
	})
	t.Logf("worker A stopped for %v", time.Since(stoppedAt).Round(time.Millisecond))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the queue to drain", 60*time.Second, func() bool { return drained(ctx, eng) })
	if err := a.stop(30 * time.Second); err != nil {
		t.Errorf("worker A: %v", err)
	}
	stopB()

	events := append(rec.Events(), readHistory(t, historyA)...)
	r := check(t, events)
	if r.Completed != len(msgs) || r.LeaseChecked != r.Executions {
		t.Errorf("completed %d of %d; lease checked at %d of %d starts", r.Completed, len(msgs), r.LeaseChecked, r.Executions)
	}
	// A resumed holding the tasks it had fetched ahead (else the test tested nothing).
	if skipped := a.logs("handing them back"); len(skipped) == 0 {
		t.Errorf("worker A handed back no task fetched before the stop")
	} else {
		t.Logf("worker A, resumed: %s", skipped[0])
	}
	if s, _ := stats(ctx, eng); s.Acked != int64(len(msgs)) || s.Dead != 0 {
		t.Errorf("stats %+v: want %d acked, nothing dead", s, len(msgs))
	}
}
