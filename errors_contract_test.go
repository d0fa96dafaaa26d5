package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/logtest"
)

// A task's attempts: QueueConfig.MaxAttempts when the message sets none, the message's own
// otherwise; a negative limit means no limit.
func TestAttemptLimits(t *testing.T) {
	t.Parallel()
	const runs = 8 // a task still pending after them has no limit below it
	for _, c := range []struct {
		name   string
		queue  int
		opts   *srq.PublishOpts
		deadAt int // 0: never
	}{
		{"queue 3", 3, nil, 3},
		{"queue 3, task 5", 3, &srq.PublishOpts{MaxAttempts: 5}, 5},
		{"queue negative", -1, nil, 0},
		{"task negative", 2, &srq.PublishOpts{MaxAttempts: -1}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[int](t, srq.QueueConfig{MaxAttempts: c.queue})
			res, err := q.Publish(ctx, 1, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
				return errors.New("boom")
			}), srq.WorkerConfig{Logger: quiet, Retry: func(int, error) time.Duration { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			for run := 1; run <= runs; run++ {
				if _, err := w.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
				ti, err := q.Engine().Task(ctx, res.ID)
				if err != nil {
					t.Fatal(err)
				}
				if ti.State == engine.StateDead {
					if run != c.deadAt {
						t.Fatalf("dead after %d runs, want %d", run, c.deadAt)
					}
					return
				}
			}
			if c.deadAt != 0 {
				t.Fatalf("not dead after %d runs, want dead after %d", runs, c.deadAt)
			}
		})
	}
}

// A panic in a handler is recovered as a *PanicError with the stack, logged, and the task is
// retried as after any other error; a control-flow error wrapped by a plain handler still decides.
func TestPanicAndWrappedControlErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	logs := &logtest.Recorder{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		switch t.Value {
		case "panics":
			if t.Attempt == 1 {
				panic("boom")
			}
			return nil
		default: // "wrapped"
			return fmt.Errorf("charge: %w", srq.Permanent(errors.New("card declined")))
		}
	}), srq.WorkerConfig{Logger: slog.New(logs), Retry: func(int, error) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Publish(ctx, "panics", &srq.PublishOpts{KeepResult: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := q.Publish(ctx, "wrapped", nil)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "the panicking task to succeed on its retry", func() bool {
		_, err := srq.ResultOf[string](ctx, q, p.ID)
		return err == nil
	})
	got := logs.Find("handler panic")
	if len(got) != 1 || logtest.Attr(got[0], "task") != p.ID ||
		!strings.Contains(fmt.Sprint(logtest.Attr(got[0], "stack")), "goroutine") {
		t.Fatalf("handler panic logged %d times (%v), want once with the task and its stack", len(got), got)
	}
	waitFor(t, "the wrapped Permanent to dead-letter its task", func() bool {
		ti, err := q.Engine().Task(ctx, wrapped.ID)
		return err == nil && ti.State == engine.StateDead && ti.Attempts == 1
	})
}
