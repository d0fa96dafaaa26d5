package srq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/srqueue/srq"
)

// A step cancelled because its parent is a dead letter cancels, for now, the steps that depend on
// it through fail edges, down the whole chain: the flow counts each, ResultOf reports each as
// cancelled, and a requeue of the dead letter reopens them all and the flow completes. The chain
// lives in one queue, or alternates between two (every release then goes through the relay).
func TestFlowCancelledChain(t *testing.T) {
	t.Parallel()
	for _, across := range []bool{false, true} {
		name := "one queue"
		if across {
			name = "two queues"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			qa, c := newQueue[order](t, srq.QueueConfig{})
			qb := qa
			if across {
				var err error
				if qb, err = srq.NewQueue[order](c, srq.QueueConfig{Name: qa.Name() + "-b"}); err != nil {
					t.Fatal(err)
				}
			}
			var failing atomic.Bool
			failing.Store(true)
			var runs atomic.Int64
			h := srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
				runs.Add(1)
				if t.Step() == "p" && failing.Load() {
					return srq.Permanent(errors.New("card declined"))
				}
				return nil
			})
			for _, q := range []*srq.Queue[order]{qa, qb} {
				w, err := srq.NewWorker(q, h, srq.WorkerConfig{Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				runWorker(t, w)
				if !across {
					break
				}
			}
			p := qa.Step("p", order{}, nil)
			f := qb.Step("f", order{}, nil).After(p)
			g := qa.Step("g", order{}, nil).After(f)
			h3 := qb.Step("h", order{}, nil).After(g)
			if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "chain", Steps: []*srq.Step{p, f, g, h3}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every step behind p to be cancelled", func() bool {
				info, err := qa.Flow(ctx, "chain")
				return err == nil && info.Failed == 4
			})
			info, err := qa.Flow(ctx, "chain")
			if err != nil {
				t.Fatal(err)
			}
			if info.State != srq.FlowFailed || info.Succeeded != 0 || info.Failed != 4 || info.FailedForGood != 0 {
				t.Fatalf("flow: %s, succeeded %d, failed %d, for good %d; want failed, 0, 4, 0",
					info.State, info.Succeeded, info.Failed, info.FailedForGood)
			}
			want := map[string]string{"p": "dead", "f": "cancelled", "g": "cancelled", "h": "cancelled"}
			for _, st := range info.Steps {
				if string(st.State) != want[st.Name] {
					t.Errorf("step %s is %s, want %s", st.Name, st.State, want[st.Name])
				}
			}
			for _, s := range []struct {
				q    *srq.Queue[order]
				name string
			}{{qb, "f"}, {qa, "g"}, {qb, "h"}} {
				_, err := srq.ResultOf[struct{}](ctx, s.q, "chain/"+s.name)
				var failed *srq.TaskFailedError
				if !errors.As(err, &failed) || failed.State != "cancelled" || failed.Reason == "" {
					t.Errorf("ResultOf %s: %v, want a *TaskFailedError, cancelled, with its reason", s.name, err)
				}
				if errors.Is(err, srq.ErrNotEnded) {
					t.Errorf("ResultOf %s: %v matches ErrNotEnded", s.name, err)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("%d handler runs, want 1 (only p)", runs.Load())
			}

			failing.Store(false)
			if n, err := qa.Requeue(ctx, "chain/p"); err != nil || n != 1 {
				t.Fatalf("Requeue: %d, %v", n, err)
			}
			waitFor(t, "the flow to complete", func() bool {
				info, err := qa.Flow(ctx, "chain")
				return err == nil && info.State == srq.FlowCompleted
			})
			if info, _ := qa.Flow(ctx, "chain"); info.Succeeded != 4 || info.Failed != 0 {
				t.Fatalf("after the requeue: succeeded %d, failed %d", info.Succeeded, info.Failed)
			}
			if runs.Load() != 5 {
				t.Fatalf("%d handler runs, want 5 (p twice, then f, g, h once)", runs.Load())
			}
		})
	}
}

// A step cancelled for now is seen as cancelled by a step behind it with ContinueDependents, which
// runs.
func TestFlowContinueAfterCancelledStep(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	got := make(chan []srq.ParentState, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		switch t.Step() {
		case "p":
			return srq.Permanent(errors.New("no stock"))
		case "report":
			ps, err := t.Parents(ctx)
			if err != nil {
				return err
			}
			got <- ps
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	p := q.Step("p", order{}, nil)
	f := q.Step("f", order{}, nil).After(p)
	report := q.Step("report", order{}, nil).AfterWith(srq.ContinueDependents, f)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "cont", Steps: []*srq.Step{p, f, report}}); err != nil {
		t.Fatal(err)
	}
	select {
	case ps := <-got:
		if len(ps) != 1 || ps[0].Name != "f" || ps[0].State != "cancelled" {
			t.Fatalf("report's parents: %+v, want f cancelled", ps)
		}
	case <-ctx.Done():
		t.Fatal("report did not run")
	}
}

// A flow id is refused, with ErrFlowConflict and nothing written, when a flow of that id lives in
// a queue the new flow writes to, even when its first step is in another queue (another home).
func TestFlowIDTakenInAnotherQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	qa, c := newQueue[order](t, srq.QueueConfig{})
	qb, err := srq.NewQueue[order](c, srq.QueueConfig{Name: qa.Name() + "-b"})
	if err != nil {
		t.Fatal(err)
	}
	x := qa.Step("x", order{}, nil)
	first := &srq.Flow{ID: "dup", Steps: []*srq.Step{x, qb.Step("y", order{}, nil).After(x)}}
	if res, err := srq.PublishFlow(ctx, first); err != nil || res.Duplicate {
		t.Fatalf("first: %+v, %v", res, err)
	}
	before, err := qb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x2 := qb.Step("x", order{}, nil)
	second := &srq.Flow{ID: "dup", Steps: []*srq.Step{x2, qa.Step("y", order{}, nil).After(x2), qb.Step("z", order{}, nil).After(x2)}}
	if _, err := srq.PublishFlow(ctx, second); !errors.Is(err, srq.ErrFlowConflict) {
		t.Fatalf("the same id with its first step in another queue: %v, want ErrFlowConflict", err)
	}
	if _, err := qb.Flow(ctx, "dup"); !errors.Is(err, srq.ErrNotFound) {
		t.Fatalf("qb has a flow dup after the refused publish: %v", err)
	}
	after, err := qb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Waiting != before.Waiting || after.Pending != before.Pending || after.FlowsStarted != before.FlowsStarted {
		t.Fatalf("the refused publish left work in qb: before %+v, after %+v", before, after)
	}
	// The other way round: a flow homed in qb, then one homed in qa that writes to qb.
	single := &srq.Flow{ID: "solo", Steps: []*srq.Step{qb.Step("x", order{}, nil)}}
	if _, err := srq.PublishFlow(ctx, single); err != nil {
		t.Fatal(err)
	}
	x3 := qa.Step("x", order{}, nil)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "solo", Steps: []*srq.Step{x3, qb.Step("w", order{}, nil).After(x3)}}); !errors.Is(err, srq.ErrFlowConflict) {
		t.Fatalf("a flow homed in qa writing to qb, where a flow of its id lives: %v, want ErrFlowConflict", err)
	}
	if res, err := srq.PublishFlow(ctx, first); err != nil || !res.Duplicate {
		t.Fatalf("the first flow again: %+v, %v; want a duplicate", res, err)
	}
}

// Stats.Published counts flow steps as they are released, so published stays at or above what
// was acked, dead-lettered, pending and in flight at every point of a flow's run.
func TestFlowStepsCountAsPublished(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	check := func(when string) {
		t.Helper()
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Published < st.Acked+st.Dead+st.Pending+st.InFlight {
			t.Fatalf("%s: published %d < acked %d + dead %d + pending %d + in flight %d",
				when, st.Published, st.Acked, st.Dead, st.Pending, st.InFlight)
		}
	}
	a := q.Step("a", order{}, nil)
	var steps = []*srq.Step{a}
	for _, n := range []string{"b", "c", "d"} {
		steps = append(steps, q.Step(n, order{}, nil).After(a))
	}
	steps = append(steps, q.Step("bad", order{}, nil).After(a))
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "count", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	check("after the publish")
	if st, _ := q.Stats(ctx); st.Published != 1 || st.Waiting != 4 {
		t.Fatalf("after the publish: published %d, waiting %d; want 1 (the first step), 4", st.Published, st.Waiting)
	}
	var handled atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		check("in a handler")
		handled.Add(1)
		if t.Step() == "bad" {
			return srq.Permanent(errors.New("bad"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "every step to end", func() bool {
		info, err := q.Flow(ctx, "count")
		return err == nil && info.Succeeded == 4 && info.Failed == 1
	})
	check("at the end")
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Published != 5 || st.Acked != 4 || st.Dead != 1 {
		t.Fatalf("at the end: published %d, acked %d, dead %d; want 5, 4, 1", st.Published, st.Acked, st.Dead)
	}
}

// A flow that does not exist is reported as such, not as a task.
func TestFlowNotFoundMessage(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[order](t, srq.QueueConfig{})
	_, err := q.Flow(testCtx(t), "nope")
	if !errors.Is(err, srq.ErrNotFound) || err.Error() != "srq: not found: flow nope" {
		t.Fatalf("Flow of a missing flow: %v, want ErrNotFound saying \"srq: not found: flow nope\"", err)
	}
}
