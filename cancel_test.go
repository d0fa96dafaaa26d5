package srq_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// A pending task of an ordered partition is cancelled: the others run in their order; a delayed
// one too; cancelling it again, or an unknown task, fails clearly.
func TestCancelPending(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	var ids []string
	for i := range 4 {
		res, err := q.Publish(ctx, order{User: "u", Seq: i}, &srq.PublishOpts{Partition: "u", Ordered: true, KeepResult: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	delayed, err := q.Publish(ctx, order{User: "later", Seq: 9}, &srq.PublishOpts{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ids[1], delayed.ID} {
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatalf("Cancel %s: %v", id, err)
		}
	}
	if err := q.Cancel(ctx, ids[1]); !errors.Is(err, srq.ErrFinished) {
		t.Fatalf("Cancel of a cancelled task that keeps its outcome: %v", err)
	}
	if err := q.Cancel(ctx, "nope"); !errors.Is(err, srq.ErrNotFound) {
		t.Fatalf("Cancel of an unknown task: %v", err)
	}
	var seen []int
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		seen = append(seen, t.Value.Seq)
		return nil
	}), srq.WorkerConfig{Logger: quiet, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := w.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if !slices.Equal(seen, []int{0, 2, 3}) {
		t.Fatalf("ran %v, want [0 2 3]", seen)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.ResultOf[string](ctx, q, ids[1]); !errors.As(err, &failed) || failed.State != "cancelled" {
		t.Fatalf("ResultOf a cancelled task: %v", err)
	}
	st, err := q.Engine().Stats(ctx)
	if err != nil || st.Pending != 0 || st.Cancelled != 2 || st.ScheduledPartitions != 0 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	if err := q.Cancel(ctx, ids[0]); !errors.Is(err, srq.ErrFinished) {
		t.Fatalf("Cancel of an acked task that keeps its outcome: %v", err)
	}
}

// A running task is cancelled: its handler's context ends with ErrCancelled within a lease
// extension interval, the task is not retried, and its lease is released.
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	started := make(chan string, 1)
	var mu sync.Mutex
	var causes []error
	runs := 0
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		mu.Lock()
		runs++
		mu.Unlock()
		started <- t.ID
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		return ctx.Err()
	}), srq.WorkerConfig{Logger: quiet, Lease: 600 * time.Millisecond, ShutdownTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Publish(ctx, order{User: "long"}, &srq.PublishOpts{Partition: "p", Ordered: true, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	id := <-started
	asked := time.Now()
	if err := q.Cancel(ctx, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.WaitResult[string](ctx, q, res.ID); !errors.As(err, &failed) || failed.State != "cancelled" {
		t.Fatalf("WaitResult of the cancelled task: %v", err)
	}
	if took := time.Since(asked); took > 2*time.Second {
		t.Errorf("the cancellation took %v", took)
	}
	// The ordered partition is free again: a new task of it runs.
	if _, err := q.Publish(ctx, order{User: "next"}, &srq.PublishOpts{Partition: "p", Ordered: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the partition stayed held after the cancel")
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 2 || !errors.Is(causes[0], srq.ErrCancelled) || runs != 2 {
		t.Fatalf("causes %v, runs %d: want ErrCancelled, then the next task's shutdown, and no retry", causes, runs)
	}
	if err := q.Cancel(ctx, res.ID); !errors.Is(err, srq.ErrFinished) {
		t.Fatalf("Cancel of a cancelled task: %v", err)
	}
}

// A running Worker fires its queue's schedules: no Scheduler is needed.
func TestWorkerFiresSchedules(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	if _, err := q.Schedule(ctx, "tick", order{User: "cron"}, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		got <- t.ID
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	select {
	case id := <-got:
		if len(id) < 11 || id[:11] != "sched/tick/" {
			t.Fatalf("ran %q, want a tick of schedule tick", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no tick ran")
	}
}
