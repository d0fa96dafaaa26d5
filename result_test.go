package srq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

type receipt struct {
	Order string
	Cents int
}

// chargeHandler returns a receipt for every order, except "bad" ones, which fail for good.
var chargeHandler = srq.ResultHandlerFunc[order, receipt](func(ctx context.Context, t *srq.Task[order]) (receipt, error) {
	if t.Value.User == "bad" {
		return receipt{}, srq.Permanent(errors.New("card declined"))
	}
	return receipt{Order: t.Value.User, Cents: 100 * t.Value.Seq}, nil
})

// A result written by a worker is read after the worker has exited; a task that kept none, or
// that failed, says so.
func TestResultReadAfterWorkerExits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{ResultRetention: time.Hour})
	ok, err := q.Publish(ctx, order{User: "ann", Seq: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := q.Publish(ctx, order{User: "bad"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, chargeHandler, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	got, err := srq.ResultOf[receipt](ctx, q, ok.ID)
	if err != nil || got != (receipt{Order: "ann", Cents: 300}) {
		t.Fatalf("ResultOf: %+v, %v", got, err)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.ResultOf[receipt](ctx, q, bad.ID); !errors.As(err, &failed) || failed.State != "dead" ||
		!strings.Contains(failed.Reason, "card declined") {
		t.Fatalf("ResultOf a dead letter: %v", err)
	}
	if _, err := srq.ResultOf[receipt](ctx, q, "nope"); !errors.Is(err, srq.ErrNotFound) {
		t.Fatalf("ResultOf an unknown task: %v", err)
	}
	pending, err := q.Publish(ctx, order{User: "later"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srq.ResultOf[receipt](ctx, q, pending.ID); !errors.Is(err, srq.ErrNotEnded) {
		t.Fatalf("ResultOf a pending task: %v", err)
	}
}

// Without a retention, a result is kept only for a task that asks for it.
func TestResultNotKeptByDefault(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	plain, _ := q.Publish(ctx, order{User: "a", Seq: 1}, nil)
	kept, _ := q.Publish(ctx, order{User: "b", Seq: 2}, &srq.PublishOpts{KeepResult: time.Minute})
	w, err := srq.NewWorker(q, chargeHandler, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := srq.ResultOf[receipt](ctx, q, plain.ID); !errors.Is(err, srq.ErrNotFound) {
		t.Fatalf("a result nobody asked to keep: %v", err)
	}
	if got, err := srq.ResultOf[receipt](ctx, q, kept.ID); err != nil || got.Cents != 200 {
		t.Fatalf("KeepResult: %+v, %v", got, err)
	}
}

func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{MaxResultBytes: 64})
	res, _ := q.Publish(ctx, "x", &srq.PublishOpts{KeepResult: time.Minute})
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[string, string](func(ctx context.Context, t *srq.Task[string]) (string, error) {
		return strings.Repeat("r", 100), nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.ResultOf[string](ctx, q, res.ID); !errors.As(err, &failed) || !strings.Contains(failed.Reason, "result too large") {
		t.Fatalf("an oversized result: %v", err)
	}
}

func TestPublishAndWait(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, chargeHandler, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	got, err := srq.PublishAndWait[receipt](ctx, q, order{User: "ann", Seq: 2}, nil)
	if err != nil || got.Cents != 200 {
		t.Fatalf("PublishAndWait: %+v, %v", got, err)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.PublishAndWait[receipt](ctx, q, order{User: "bad"}, nil); !errors.As(err, &failed) || failed.State != "dead" {
		t.Fatalf("PublishAndWait of a task that dies: %v", err)
	}
	// The task ends before the wait begins: the answer is not lost.
	res, err := q.Publish(ctx, order{User: "bob", Seq: 5}, &srq.PublishOpts{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to end", func() bool {
		_, err := srq.ResultOf[receipt](ctx, q, res.ID)
		return err == nil
	})
	if got, err := srq.WaitResult[receipt](ctx, q, res.ID); err != nil || got.Cents != 500 {
		t.Fatalf("WaitResult after the end: %+v, %v", got, err)
	}
}

func TestPublishAndWaitTimeout(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := srq.PublishAndWait[receipt](short, q, order{User: "nobody runs this"}, &srq.PublishOpts{ID: "t1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PublishAndWait with no worker: %v", err)
	}
	// The task is still there, and can be waited for again once a worker runs it.
	w, err := srq.NewWorker(q, chargeHandler, srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if got, err := srq.WaitResult[receipt](ctx, q, "t1"); err != nil || got.Order != "nobody runs this" {
		t.Fatalf("WaitResult: %+v, %v", got, err)
	}
	// The id is free again once the task was acked: published again, it is waited for anew.
	if got, err := srq.PublishAndWait[receipt](ctx, q, order{User: "again"}, &srq.PublishOpts{ID: "t1"}); err != nil || got.Order != "again" {
		t.Fatalf("PublishAndWait of the id again: %+v, %v", got, err)
	}
}

// ResultOf and WaitResult of an unknown id fail with ErrNotFound naming the task, on a queue of
// one shard as on a sharded one (errors.md).
func TestResultNotFoundNamesTheTask(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards-%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[string](t, srq.QueueConfig{Shards: shards})
			for name, read := range map[string]func(string) error{
				"ResultOf": func(id string) error { _, err := srq.ResultOf[string](ctx, q, id); return err },
				"WaitResult": func(id string) error {
					_, err := srq.WaitResult[string](ctx, q, id)
					return err
				},
			} {
				err := read("ghost-" + name)
				if !errors.Is(err, srq.ErrNotFound) || !strings.Contains(err.Error(), "ghost-"+name) {
					t.Errorf("%s of an unknown id: %v, want ErrNotFound naming ghost-%s", name, err, name)
				}
			}
		})
	}
}

// QueueConfig.ResultRetention keeps the results handlers give and nothing else: a task acked
// without a result, or cancelled, keeps no outcome by it; a dead letter is reported as dead while
// it is one (lifecycle.md).
func TestResultRetentionKeepsOnlyResults(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{ResultRetention: time.Minute})
	ids := map[string]string{}
	for _, v := range []string{"result", "none", "nil", "dead"} {
		res, err := q.Publish(ctx, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[v] = res.ID
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		switch t.Value {
		case "result":
			return t.SetResult("r")
		case "nil":
			return t.SetResult(nil)
		case "dead":
			return srq.Permanent(errors.New("no"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 4 {
		t.Fatal(n, err)
	}
	if got, err := srq.ResultOf[string](ctx, q, ids["result"]); err != nil || got != "r" {
		t.Errorf("a result given: %q, %v", got, err)
	}
	if got, err := srq.ResultOf[*string](ctx, q, ids["nil"]); err != nil || got != nil {
		t.Errorf("SetResult(nil): %v, %v, want a kept nil result", got, err)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.ResultOf[string](ctx, q, ids["dead"]); !errors.As(err, &failed) || failed.State != "dead" {
		t.Errorf("a dead letter: %v, want a *TaskFailedError, dead", err)
	}
	if _, err := q.Purge(ctx, ids["dead"]); err != nil {
		t.Fatal(err)
	}
	cancelled, err := q.Publish(ctx, "cancelled", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	for v, id := range map[string]string{"no result": ids["none"], "purged": ids["dead"], "cancelled": cancelled.ID} {
		if _, err := srq.ResultOf[string](ctx, q, id); !errors.Is(err, srq.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound (no outcome kept)", v, err)
		}
	}
}
