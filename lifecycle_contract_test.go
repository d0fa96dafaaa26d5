package srq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// An outcome is deleted once its retention ends: a later call that writes an outcome forgets it.
func TestOutcomeRetentionEnds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	res, err := q.Publish(ctx, order{User: "a"}, &srq.PublishOpts{KeepResult: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := srq.ResultOf[string](ctx, q, res.ID); errors.Is(err, srq.ErrNotFound) {
		t.Fatalf("the outcome is gone before its retention ended: %v", err)
	}
	waitFor(t, "the outcome to be forgotten", func() bool {
		other, err := q.Publish(ctx, order{User: "b"}, &srq.PublishOpts{KeepResult: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Cancel(ctx, other.ID); err != nil { // writes an outcome
			t.Fatal(err)
		}
		_, err = srq.ResultOf[string](ctx, q, res.ID)
		return errors.Is(err, srq.ErrNotFound)
	})
}

// ResultOf fails with ErrNotEnded while the task runs.
func TestResultOfRunningTask(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{ResultRetention: time.Hour})
	res, err := q.Publish(ctx, order{User: "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := q.Engine().Fetch(ctx, "c", 1, time.Minute); err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %v, %v", ds, err)
	}
	if _, err := srq.ResultOf[string](ctx, q, res.ID); !errors.Is(err, srq.ErrNotEnded) {
		t.Fatalf("ResultOf a running task: %v, want ErrNotEnded", err)
	}
}

// A running task that is cancelled and whose handler returns nil anyway is acked, with its result.
func TestCancelledHandlerReturningNilIsAcked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	res, err := q.Publish(ctx, order{User: "a"}, &srq.PublishOpts{KeepResult: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[order, string](func(ctx context.Context, t *srq.Task[order]) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "done anyway", nil
	}), srq.WorkerConfig{Logger: quiet, Lease: 600 * time.Millisecond}) // a cancel reaches it within Lease/3
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	<-started
	if err := q.Cancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	var got string
	waitFor(t, "the task to end", func() bool {
		got, err = srq.ResultOf[string](ctx, q, res.ID)
		if err != nil && !errors.Is(err, srq.ErrNotEnded) {
			t.Fatalf("ResultOf: %v", err)
		}
		return err == nil
	})
	if got != "done anyway" {
		t.Fatalf("result %q, want the handler's", got)
	}
}

// A task cancelled while its worker is gone ends as cancelled when recovery takes back its lease,
// and never runs.
func TestCancelOfATaskWhoseWorkerDied(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	res, err := q.Publish(ctx, order{User: "x"}, &srq.PublishOpts{KeepResult: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := q.Engine().Fetch(ctx, "dead-worker", 1, 100*time.Millisecond); err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %v, %v", ds, err)
	}
	if err := q.Cancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(context.Context, *srq.Task[order]) error {
		runs.Add(1)
		return nil
	}), srq.WorkerConfig{Logger: quiet, RecoverInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	var failed *srq.TaskFailedError
	waitFor(t, "the cancelled outcome", func() bool {
		_, err := srq.ResultOf[string](ctx, q, res.ID)
		return errors.As(err, &failed)
	})
	if failed.State != "cancelled" || runs.Load() != 0 {
		t.Fatalf("state %s after %d runs, want cancelled and no run", failed.State, runs.Load())
	}
}

// HoldPartition holds an ordered partition until its dead letter goes, also when the dead-letter
// cap drops it; an unordered partition ignores it.
func TestHoldPartitionAndTheDeadLetterCap(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{OnDeadLetter: srq.HoldPartition, DeadLetterMaxCount: 2})
	publish := func(user string, opts srq.PublishOpts) {
		t.Helper()
		if _, err := q.Publish(ctx, order{User: user}, &opts); err != nil {
			t.Fatal(err)
		}
	}
	ran := make(chan string, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if t.Value.User == "dies" {
			return srq.Permanent(errors.New("no"))
		}
		ran <- t.Value.User
		return nil
	}), srq.WorkerConfig{Logger: quiet, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	next := func(want string) {
		t.Helper()
		select {
		case u := <-ran:
			if u != want {
				t.Fatalf("ran %s, want %s", u, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s never ran", want)
		}
	}
	publish("dies", srq.PublishOpts{Partition: "a", Ordered: true})
	publish("next-a", srq.PublishOpts{Partition: "a", Ordered: true})
	runWorker(t, w)
	waitFor(t, "partition a held", func() bool {
		held, _, err := q.Engine().PartitionsBy(ctx, engine.IndexHeld, 10)
		return err == nil && len(held) == 1
	})
	publish("dies", srq.PublishOpts{Partition: "u"})
	publish("next-u", srq.PublishOpts{Partition: "u"})
	next("next-u") // an unordered partition is not held
	// A third dead letter passes the cap of 2: the oldest, a's, goes, and a goes on.
	publish("dies", srq.PublishOpts{Partition: "b"})
	next("next-a")
}

// Events(ctx, "") reads from now on: an event written before is never read. The stream tells a
// lease that recovery took back (recovered) and a dead letter purged (purged).
func TestEventsFromNowRecoveredAndPurged(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{Events: 1000})
	old, err := q.Publish(ctx, order{User: "old"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	evs := make(chan srq.Event, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range q.Events(rctx, "") {
			if err == nil {
				evs <- ev
			} else if rctx.Err() != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	seen := map[string]bool{} // kind:id
	read := func(until func() bool) {
		t.Helper()
		for !until() {
			select {
			case ev := <-evs:
				seen[string(ev.Kind)+":"+ev.ID] = true
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("events read: %v", seen)
			}
		}
	}
	// The reader reads from its start, which is not known: publish markers until it reads one.
	var markers []string
	read(func() bool {
		for _, id := range markers {
			if seen["published:"+id] {
				return true
			}
		}
		res, err := q.Publish(ctx, order{User: "marker"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		markers = append(markers, res.ID)
		return false
	})
	ds, err := q.Engine().Fetch(ctx, "gone", 1, 50*time.Millisecond)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %v, %v", ds, err)
	}
	waitFor(t, "recovery of the expired lease", func() bool {
		r, err := q.Engine().RecoverAll(ctx)
		return err == nil && r.Returned == 1
	})
	read(func() bool { return seen["recovered:"+ds[0].ID] })
	if ds, err = q.Engine().Fetch(ctx, "c", 1, time.Minute); err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %v, %v", ds, err)
	}
	if _, err := q.Engine().Kill(ctx, []engine.Failure{{Receipt: ds[0].Receipt(), Reason: "x"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Engine().Purge(ctx, []string{ds[0].ID}); err != nil || n != 1 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	read(func() bool { return seen["purged:"+ds[0].ID] })
	if seen["published:"+old.ID] {
		t.Error("a reader from now on read an event written before it started")
	}
}

// The outcome of a task published to be waited for is kept for at least 10 minutes, also when
// neither the message nor the queue asks to keep it.
func TestWaitedForOutcomeKeptTenMinutes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[string, string](func(_ context.Context, t *srq.Task[string]) (string, error) {
		return "r-" + t.Value, nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	before := time.Now()
	res, err := srq.PublishAndWait[string](ctx, q, "x", &srq.PublishOpts{ID: "w"})
	if err != nil || res != "r-x" {
		t.Fatalf("PublishAndWait: %q, %v", res, err)
	}
	end, err := c.ZScore(ctx, q.Engine().Keys().Outcomes(), "w").Result()
	if err != nil {
		t.Fatalf("the outcome's retention: %v", err)
	}
	if kept := time.UnixMilli(int64(end)).Sub(before); kept < engine.MinWaitKeep || kept > engine.MinWaitKeep+time.Minute {
		t.Fatalf("the outcome is kept %v after the publish, want 10 minutes", kept)
	}
	if got, err := srq.ResultOf[string](ctx, q, "w"); err != nil || got != "r-x" {
		t.Fatalf("ResultOf after the wait: %q, %v", got, err)
	}
}
