package srq_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// A task that waits for a signal with a timeout is pending until its time, like a sleeping task:
// Stats counts it in Pending, not in Waiting, and the stream tells no waiting or resumed; the
// signal makes it due at once, and its value is read on the next run.
func TestTimedSignalWaitIsPending(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 1000})
	ran := make(chan string, 4)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		v, err := srq.SignalValue[string](ctx, t.Delivery, "approval")
		if errors.Is(err, srq.ErrNotFound) {
			ran <- "first"
			return srq.WaitSignal("approval", time.Hour)
		}
		if err != nil {
			return srq.Permanent(err)
		}
		ran <- v
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Publish(ctx, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if v := <-ran; v != "first" {
		t.Fatalf("first run: %q", v)
	}
	waitFor(t, "the task to wait, pending", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Pending == 1 && st.InFlight == 0
	})
	if st, _ := q.Stats(ctx); st.Waiting != 0 {
		t.Errorf("Stats.Waiting %d, want 0 for a wait with a timeout", st.Waiting)
	}
	if taken, err := q.Signal(ctx, res.ID, "approval", "yes"); err != nil || !taken {
		t.Fatalf("Signal: %v, %v", taken, err)
	}
	select {
	case v := <-ran:
		if v != "yes" {
			t.Fatalf("second run read %q, want the signal's value", v)
		}
	case <-ctx.Done():
		t.Fatal("the signal did not make the task run")
	}
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ev, err := range q.Events(rctx, "0") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Kind))
		if ev.Kind == "acked" {
			break
		}
	}
	if slices.Contains(got, "waiting") || slices.Contains(got, "resumed") || !slices.Contains(got, "signal") {
		t.Errorf("events %v: want a signal and neither waiting nor resumed", got)
	}
}

// A dead letter still exists: a signal to it is kept, and ends at once the wait for it of a run
// after a requeue.
func TestSignalToADeadLetterIsKept(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	ran := make(chan string, 4)
	var runs atomic.Int32
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if runs.Add(1) == 1 {
			return srq.Permanent(errors.New("dies"))
		}
		v, err := srq.SignalValue[string](ctx, t.Delivery, "go")
		if errors.Is(err, srq.ErrNotFound) {
			return srq.WaitSignal("go", 0) // the kept signal ends it at once
		}
		if err != nil {
			return srq.Permanent(err)
		}
		ran <- v
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "d"}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "the dead letter", func() bool { st, err := q.Stats(ctx); return err == nil && st.Dead == 1 })
	if taken, err := q.Signal(ctx, "d", "go", "v"); err != nil || !taken {
		t.Fatalf("Signal to a dead letter: %v, %v; want it kept", taken, err)
	}
	if n, err := q.Requeue(ctx, "d"); err != nil || n != 1 {
		t.Fatalf("Requeue: %d, %v", n, err)
	}
	select {
	case v := <-ran:
		if v != "v" {
			t.Fatalf("read %q, want the kept signal's value", v)
		}
	case <-ctx.Done():
		t.Fatal("the requeued task did not read the kept signal")
	}
}

// A flow step released into a partition that already has 16 priorities pending joins the nearest
// one below its own, or 0 when none is below.
func TestFlowReleasePastThePriorityCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ prio, want int }{{20, 16}, {-3, 0}} {
		ctx := testCtx(t)
		q, _ := newQueue[string](t, srq.QueueConfig{})
		var msgs []srq.Message[string]
		for i := 1; i <= 16; i++ {
			msgs = append(msgs, srq.Message[string]{Value: "filler", Opts: srq.PublishOpts{Partition: "p", Priority: i, Delay: time.Hour}})
		}
		if _, err := q.PublishBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		got := make(chan int, 1)
		w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
			if t.Step() == "b" {
				got <- t.Priority
			}
			return nil
		}), srq.WorkerConfig{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		stop := runWorker(t, w)
		a := q.Step("a", "a", &srq.PublishOpts{Partition: "x"})
		b := q.Step("b", "b", &srq.PublishOpts{Partition: "p", Priority: c.prio}).After(a)
		if _, err := srq.PublishFlow(ctx, &srq.Flow{Steps: []*srq.Step{a, b}}); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p != c.want {
				t.Errorf("a step of priority %d ran at %d, want %d", c.prio, p, c.want)
			}
		case <-ctx.Done():
			t.Fatalf("the step of priority %d never ran", c.prio)
		}
		stop()
	}
}
