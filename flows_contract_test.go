package srq_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// A flow a step of which has a task id that exists already fails with ErrFlowConflict and writes
// nothing.
func TestFlowStepIDTaken(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "f/b"}); err != nil {
		t.Fatal(err)
	}
	a := q.Step("a", "a", nil)
	b := q.Step("b", "b", nil).After(a)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: []*srq.Step{a, b}}); !errors.Is(err, srq.ErrFlowConflict) {
		t.Fatalf("PublishFlow: %v, want ErrFlowConflict", err)
	}
	if _, err := q.Flow(ctx, "f"); !errors.Is(err, srq.ErrNotFound) {
		t.Errorf("the flow was written: %v", err)
	}
	if _, err := q.Engine().Task(ctx, "f/a"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("its first step was written: %v", err)
	}
}

// A released step is available after its Delay, counted from its release, or at its At.
func TestFlowReleasedStepDelayAndAt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	a := q.Step("a", "a", nil)
	delayed := q.Step("delayed", "d", &srq.PublishOpts{Delay: time.Hour}).After(a)
	timed := q.Step("timed", "t", &srq.PublishOpts{At: at}).After(a)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: []*srq.Step{a, delayed, timed}}); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "the steps' release", func() bool {
		ti, err := q.Engine().Task(ctx, "f/timed")
		return err == nil && ti.State == engine.StatePending
	})
	stop()
	d, err := q.Engine().Task(ctx, "f/delayed")
	if err != nil {
		t.Fatal(err)
	}
	// Released after it was published (EnqueuedAt), and before now: 1 h after the release.
	if d.State != engine.StatePending || d.AvailableAt.Before(d.EnqueuedAt.Add(time.Hour)) ||
		d.AvailableAt.After(time.Now().Add(time.Hour+time.Second)) {
		t.Errorf("the delayed step: %s, available at %v, published at %v; want pending, 1h after its release",
			d.State, d.AvailableAt, d.EnqueuedAt)
	}
	ti, err := q.Engine().Task(ctx, "f/timed")
	if err != nil {
		t.Fatal(err)
	}
	if !ti.AvailableAt.Equal(at) {
		t.Errorf("the timed step is available at %v, want %v", ti.AvailableAt, at)
	}
}

// The stream of a flow's home queue tells its moves: started, failed (a step died), running again
// (that step was requeued), completed; the failure and the running again name that step.
func TestFlowEvents(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 1000})
	var failed atomic.Bool
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		if t.Step() == "a" && failed.CompareAndSwap(false, true) {
			return srq.Permanent(errors.New("first run fails"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := q.Step("a", "a", nil)
	b := q.Step("b", "b", nil).After(a)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: []*srq.Step{a, b}}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "step a's dead letter", func() bool { st, err := q.Stats(ctx); return err == nil && st.Dead == 1 })
	if n, err := q.Requeue(ctx, "f/a"); err != nil || n != 1 {
		t.Fatalf("Requeue: %d, %v", n, err)
	}
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ev, err := range q.Events(rctx, "0") {
		if err != nil {
			t.Fatalf("events %v: %v", got, err)
		}
		if strings.HasPrefix(string(ev.Kind), "flow_") {
			if ev.ID != "f" {
				t.Errorf("%s names %q, want the flow's id", ev.Kind, ev.ID)
			}
			got = append(got, string(ev.Kind))
			// The failure and the running again name the step that failed and was requeued, not
			// its dependent, cancelled and reopened with it.
			if (ev.Kind == "flow_failed" || ev.Kind == "flow_running") && ev.Step != "a" {
				t.Errorf("%s names step %q, want a", ev.Kind, ev.Step)
			}
		}
		if ev.Kind == "flow_completed" {
			break
		}
	}
	if want := []string{"flow_started", "flow_failed", "flow_running", "flow_completed"}; !slices.Equal(got, want) {
		t.Fatalf("flow events %v, want %v", got, want)
	}
}

// TestFlowGoneAfterItsRetention: once Flow.Keep has passed after the flow ended, Queue.Flow does
// not find it and its id publishes a new flow, with no worker running to prune it (the flow ran
// with RunOnce).
func TestFlowGoneAfterItsRetention(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	flow := func() *srq.Flow {
		return &srq.Flow{ID: "brief", Keep: 300 * time.Millisecond, Steps: []*srq.Step{q.Step("a", "a", nil)}}
	}
	if _, err := srq.PublishFlow(ctx, flow()); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	fi, err := q.Flow(ctx, "brief")
	if err != nil || fi.State != srq.FlowCompleted {
		t.Fatalf("the flow within its retention: %+v, %v", fi, err)
	}
	if r, err := srq.PublishFlow(ctx, flow()); err != nil || !r.Duplicate {
		t.Fatalf("publish within its retention: %+v, %v; want a duplicate", r, err)
	}
	waitFor(t, "the flow's retention to end", func() bool {
		_, err := q.Flow(ctx, "brief")
		return errors.Is(err, srq.ErrNotFound)
	})
	if time.Since(fi.Ended) < 300*time.Millisecond-50*time.Millisecond {
		t.Errorf("the flow was gone %v after it ended, before its Keep of 300ms", time.Since(fi.Ended))
	}
	if r, err := srq.PublishFlow(ctx, flow()); err != nil || r.Duplicate {
		t.Fatalf("publish past its retention: %+v, %v; want a new flow", r, err)
	}
	if fi, err := q.Flow(ctx, "brief"); err != nil || fi.State != srq.FlowRunning {
		t.Fatalf("the new flow: %+v, %v; want it running", fi, err)
	}
}

// TestFlowDeadStepRequeuedPastItsRetention: a failed flow has ended while its step is a dead
// letter, and is gone once its Keep has passed; a requeue of the letter after that still runs it
// and the steps on hold behind it, with no flow to complete (flows.md).
func TestFlowDeadStepRequeuedPastItsRetention(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	failed, ran := false, map[string]int{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		ran[t.Value]++
		if t.Value == "a" && !failed {
			failed = true
			return srq.Permanent(errors.New("boom"))
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := q.Step("a", "a", nil)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "held", Keep: 300 * time.Millisecond, Steps: srq.Chain(a, q.Step("b", "b", nil))}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	if fi, err := q.Flow(ctx, "held"); err != nil || fi.State != srq.FlowFailed || fi.Ended.IsZero() {
		t.Fatalf("the flow with its step dead: %+v, %v; want failed, ended", fi, err)
	}
	waitFor(t, "the flow's retention to end", func() bool {
		_, err := q.Flow(ctx, "held")
		return errors.Is(err, srq.ErrNotFound)
	})
	if n, err := q.Requeue(ctx, "held/a"); err != nil || n != 1 {
		t.Fatalf("Requeue: %d, %v", n, err)
	}
	for range 2 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ran["a"] != 2 || ran["b"] != 1 {
		t.Errorf("ran a %d and b %d times, want 2 and 1", ran["a"], ran["b"])
	}
	if fi, err := q.Flow(ctx, "held"); !errors.Is(err, srq.ErrNotFound) {
		t.Errorf("the flow after the requeue: %+v, %v, want ErrNotFound", fi, err)
	}
}
