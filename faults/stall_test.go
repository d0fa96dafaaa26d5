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
