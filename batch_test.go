package srq_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// batchOf is one HandleBatch call as a test saw it: the tasks' ids and values.
type batchOf struct {
	ids    []string
	values []int
}

// recordBatches returns a batch handler that sends each call's tasks on the returned channel
// (buffered generously) and then returns what decide says (nil acks all).
func recordBatches(decide func(tasks []*srq.Task[int]) error) (srq.BatchHandler[int], chan batchOf) {
	calls := make(chan batchOf, 1000)
	return srq.BatchHandlerFunc[int](func(ctx context.Context, tasks []*srq.Task[int]) error {
		var b batchOf
		for _, t := range tasks {
			b.ids, b.values = append(b.ids, t.ID), append(b.values, t.Value)
		}
		calls <- b
		if decide == nil {
			return nil
		}
		return decide(tasks)
	}), calls
}

// nextBatch waits for the next batch on calls.
func nextBatch(t *testing.T, calls <-chan batchOf) batchOf {
	t.Helper()
	select {
	case b := <-calls:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a batch")
		return batchOf{}
	}
}

func taskInfo(t *testing.T, q *srq.Queue[int], id string) engine.TaskInfo {
	t.Helper()
	info, err := q.Engine().Task(testCtx(t), id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return info
}

// TestBatchMixedOutcomes: a batch whose handler returns BatchErrors settles each task as its
// error says: nil acks (with the result SetResult gave), Reject returns it at once, RejectWithDelay
// after the delay, Permanent dead-letters it, an ordinary error goes by the retry policy.
func TestBatchMixedOutcomes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	ids := []string{"ack", "reject", "later", "dead", "retry"}
	var msgs []srq.Message[int]
	for i, id := range ids {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: id, KeepResult: time.Hour}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	h, calls := recordBatches(func(tasks []*srq.Task[int]) error {
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.Attempt > 1 {
				continue // the rejected one, back at once: acked now
			}
			switch task.ID {
			case "ack":
				if err := task.SetResult("done"); err != nil {
					return err
				}
			case "reject":
				errs[i] = srq.Reject(errors.New("once more"))
			case "later":
				errs[i] = srq.RejectWithDelay(time.Hour, errors.New("not now"))
			case "dead":
				errs[i] = srq.Permanent(errors.New("hopeless"))
			case "retry":
				errs[i] = errors.New("flaky")
			}
		}
		return srq.BatchErrors(errs)
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: 50 * time.Millisecond}, srq.WorkerConfig{
		Concurrency: 1, Logger: quiet,
		Retry: func(attempt int, err error) time.Duration { return time.Hour },
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	first := nextBatch(t, calls)
	slices.Sort(first.ids)
	if want := slices.Sorted(slices.Values(ids)); !slices.Equal(first.ids, want) {
		t.Fatalf("first batch %v, want all of %v", first.ids, want)
	}
	if again := nextBatch(t, calls); !slices.Equal(again.ids, []string{"reject"}) {
		t.Fatalf("second batch %v, want the rejected task alone", again.ids)
	}
	waitFor(t, "two acks and a dead letter", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked == 2 && st.Dead == 1
	})
	if got, err := srq.ResultOf[string](ctx, q, "ack"); err != nil || got != "done" {
		t.Errorf("the acked task's result: %q, %v; want \"done\"", got, err)
	}
	if _, err := srq.ResultOf[string](ctx, q, "reject"); err != nil {
		t.Errorf("the task rejected once, then acked: %v", err)
	}
	for _, tc := range []struct {
		id       string
		state    engine.State
		attempts int
		lastErr  string
		later    bool // available in about an hour
	}{
		{id: "later", state: engine.StatePending, attempts: 1, lastErr: "not now", later: true},
		{id: "dead", state: engine.StateDead, attempts: 1, lastErr: "hopeless"},
		{id: "retry", state: engine.StatePending, attempts: 1, lastErr: "flaky", later: true},
	} {
		info := taskInfo(t, q, tc.id)
		if info.State != tc.state || info.Attempts != tc.attempts || info.LastError != tc.lastErr {
			t.Errorf("task %s: %s, %d attempts, last error %q; want %s, %d, %q",
				tc.id, info.State, info.Attempts, info.LastError, tc.state, tc.attempts, tc.lastErr)
		}
		if tc.later && time.Until(info.AvailableAt) < 50*time.Minute {
			t.Errorf("task %s is available at %v, want in about an hour", tc.id, info.AvailableAt)
		}
	}
}

// TestBatchErrorAppliesToAll: an error that is not a BatchError applies to every task of the
// batch, and BatchErrors of the wrong length gives each task an ErrInvalid error. The tasks that
// go back, go back in one call.
func TestBatchErrorAppliesToAll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		lastErr string
		state   engine.State
		rejects int // reject calls
	}{
		{name: "one error for all", err: errors.New("downstream is down"), lastErr: "downstream is down", state: engine.StatePending, rejects: 1},
		{name: "a wrapped permanent", err: fmt.Errorf("wrapped: %w", srq.Permanent(errors.New("bad batch"))), lastErr: "bad batch", state: engine.StateDead},
		{name: "BatchErrors too short", err: srq.BatchErrors([]error{nil}), lastErr: "BatchErrors has 1 errors for a batch of 3 tasks", state: engine.StatePending, rejects: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, watch := watchedQueue[int](t)
			var msgs []srq.Message[int]
			for i := range 3 {
				msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: fmt.Sprint(i)}})
			}
			if _, err := q.PublishBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			h, calls := recordBatches(func([]*srq.Task[int]) error { return tc.err })
			w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 3, MaxWait: time.Minute}, srq.WorkerConfig{
				Concurrency: 1, Logger: quiet, Retry: func(int, error) time.Duration { return time.Hour },
			})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			if b := nextBatch(t, calls); len(b.ids) != 3 {
				t.Fatalf("batch of %d, want 3 (MaxSize, before MaxWait)", len(b.ids))
			}
			waitFor(t, "all three settled", func() bool {
				st, err := q.Engine().Stats(ctx)
				return err == nil && st.InFlight == 0 && st.Pending+st.Dead == 3
			})
			for i := range 3 {
				if info := taskInfo(t, q, fmt.Sprint(i)); !strings.Contains(info.LastError, tc.lastErr) || info.State != tc.state {
					t.Errorf("task %d: %s, last error %q; want %s, saying %q", i, info.State, info.LastError, tc.state, tc.lastErr)
				}
			}
			if n := watch.calls("reject"); n != tc.rejects {
				t.Errorf("%d reject calls, want %d", n, tc.rejects)
			}
		})
	}
}

// TestBatchMaxWaitAndMaxSize: under a trickle (the next task published once the last batch ran)
// each batch holds one task and runs MaxWait after it was fetched, not before; a backlog runs in
// batches of MaxSize without waiting for MaxWait.
func TestBatchMaxWaitAndMaxSize(t *testing.T) {
	t.Parallel()
	t.Run("trickle", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[int](t, srq.QueueConfig{})
		const maxWait = 100 * time.Millisecond
		h, calls := recordBatches(nil)
		w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: maxWait}, srq.WorkerConfig{Concurrency: 1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		for i := range 3 {
			published := time.Now()
			if _, err := q.Publish(ctx, i, nil); err != nil {
				t.Fatal(err)
			}
			b := nextBatch(t, calls)
			if took := time.Since(published); len(b.values) != 1 || b.values[0] != i || took < maxWait {
				t.Fatalf("batch %v after %v, want [%d] after MaxWait %v", b.values, took, i, maxWait)
			}
		}
	})
	t.Run("backlog", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[int](t, srq.QueueConfig{})
		var msgs []srq.Message[int]
		for i := range 20 {
			msgs = append(msgs, srq.Message[int]{Value: i})
		}
		if _, err := q.PublishBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		var running, most atomic.Int32
		h, calls := recordBatches(func([]*srq.Task[int]) error {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			return nil
		})
		// MaxWait is far beyond the test's deadline: only full batches run.
		w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 5, MaxWait: time.Hour}, srq.WorkerConfig{Concurrency: 2, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
		var seen []int
		for range 4 {
			b := nextBatch(t, calls)
			if len(b.values) != 5 {
				t.Fatalf("batch of %d, want MaxSize 5", len(b.values))
			}
			seen = append(seen, b.values...)
		}
		slices.Sort(seen)
		for i, v := range seen {
			if v != i {
				t.Fatalf("ran %v, want 0 to 19 once each", seen)
			}
		}
		if most.Load() > 2 {
			t.Errorf("%d batches ran at once, want at most Concurrency 2", most.Load())
		}
	})
}

// TestBatchGroups: a batch never mixes groups, by header or by partition; an ordered partition
// whose tasks name different groups still runs in order.
func TestBatchGroups(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		group   func(*srq.Delivery) string
		ordered bool
	}{
		{name: "by header", group: srq.ByHeader("tenant")},
		{name: "by partition", group: srq.ByPartition},
		{name: "by header within an ordered partition", group: srq.ByHeader("tenant"), ordered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[int](t, srq.QueueConfig{})
			const total = 24
			tenantOf := func(i int) string { // t0 t0 t1 t1 t2 t2 t0 none…
				if i%8 == 7 {
					return "none"
				}
				return fmt.Sprint("t", i/2%3)
			}
			var msgs []srq.Message[int]
			for i := range total {
				o := srq.PublishOpts{Headers: map[string]string{"tenant": tenantOf(i)}, Partition: tenantOf(i)}
				if tenantOf(i) == "none" { // no header, the base partition
					o.Headers, o.Partition = nil, ""
				}
				if tc.ordered {
					o.Partition, o.Ordered = "one", true
				}
				msgs = append(msgs, srq.Message[int]{Value: i, Opts: o})
			}
			if _, err := q.PublishBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			h, calls := recordBatches(nil)
			w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 100, MaxWait: 20 * time.Millisecond, Group: tc.group},
				srq.WorkerConfig{Concurrency: 2, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			var ran []int
			for len(ran) < total {
				b := nextBatch(t, calls)
				for _, v := range b.values {
					if tenantOf(v) != tenantOf(b.values[0]) {
						t.Fatalf("batch %v mixes groups", b.values)
					}
				}
				ran = append(ran, b.values...)
			}
			if tc.ordered && !slices.IsSorted(ran) {
				t.Fatalf("the ordered partition ran %v, want in order", ran)
			}
			if tc.ordered {
				// The run fetched whole is cut at each change of group: the rest is handed back
				// (lifecycle.md's handed_back), no attempt used.
				st, err := q.Engine().Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.HandedBack == 0 || st.Rejected != 0 {
					t.Fatalf("handed back %d, rejected %d; want tasks handed back at the changes of group, none rejected", st.HandedBack, st.Rejected)
				}
			}
			slices.Sort(ran)
			if len(slices.Compact(ran)) != total {
				t.Fatalf("ran %v, want each of %d once", ran, total)
			}
		})
	}
}

// TestBatchOrderedPartition: an ordered partition's tasks run in order across batches smaller
// than the run fetched, one batch of the partition at a time, and a task rejected in a batch takes
// the later ones of its partition back with it: they run again after it, in order.
func TestBatchOrderedPartition(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	const total, rejected = 30, 10
	var msgs []srq.Message[int]
	for i := range total {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: "acct", Ordered: true}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var inFlight atomic.Int32
	var mu sync.Mutex
	var seq []int
	h := srq.BatchHandlerFunc[int](func(ctx context.Context, tasks []*srq.Task[int]) error {
		if inFlight.Add(1) != 1 {
			t.Error("two batches of one ordered partition ran at once")
		}
		defer inFlight.Add(-1)
		errs := make([]error, len(tasks))
		mu.Lock()
		defer mu.Unlock()
		for i, task := range tasks {
			seq = append(seq, task.Value)
			if task.Value == rejected && task.Attempt == 1 {
				errs[i] = srq.Reject(errors.New("once more"))
			}
		}
		return srq.BatchErrors(errs)
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 4, MaxWait: 10 * time.Millisecond}, srq.WorkerConfig{Concurrency: 3, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "every task acked", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked == total
	})
	mu.Lock()
	defer mu.Unlock()
	// 0, 1, … up to the end of the batch that held the rejected task, then again from it to the end.
	isRejected := func(v int) bool { return v == rejected }
	first := slices.IndexFunc(seq, isRejected)
	drop := slices.IndexFunc(seq[first+1:], isRejected)
	if first < 0 || drop < 0 {
		t.Fatalf("ran %v: the rejected task did not run twice", seq)
	}
	drop += first + 1
	for i, v := range seq {
		want := i
		if i >= drop {
			want = rejected + i - drop
		}
		if v != want {
			t.Fatalf("ran %v, want 0 to the rejected task's batch's end, then %d to %d", seq, rejected, total-1)
		}
	}
	if seq[len(seq)-1] != total-1 || drop <= rejected {
		t.Fatalf("ran %v, want 0 to %d, with %d again after its batch", seq, total-1, rejected)
	}
}

// TestBatchMiddlewareSeesEachTask: each task goes through the worker's middleware, which sees that
// task's own outcome and may change it; a task whose middleware does not call next is not in the
// batch, and gets what its middleware returned.
func TestBatchMiddlewareSeesEachTask(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	errBad := errors.New("bad value")
	var msgs []srq.Message[int]
	for _, id := range []string{"ok1", "ok2", "bad", "skip"} {
		msgs = append(msgs, srq.Message[int]{Opts: srq.PublishOpts{ID: id}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	saw := map[string]error{}
	type mark struct{}
	observe := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			if d.ID == "skip" {
				return srq.Snooze(time.Hour) // next is not called
			}
			err := next(context.WithValue(ctx, mark{}, d.ID), d)
			mu.Lock()
			saw[d.ID] = err
			mu.Unlock()
			return err
		}
	}
	permanentIfBad := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			if err := next(ctx, d); errors.Is(err, errBad) {
				return srq.Permanent(err)
			} else {
				return err
			}
		}
	}
	inner, calls := recordBatches(func(tasks []*srq.Task[int]) error {
		errs := make([]error, len(tasks))
		for i, task := range tasks {
			if task.ID == "bad" {
				errs[i] = errBad
			}
		}
		return srq.BatchErrors(errs)
	})
	h := srq.BatchHandlerFunc[int](func(ctx context.Context, tasks []*srq.Task[int]) error {
		if v := ctx.Value(mark{}); v != nil {
			t.Errorf("the batch's context has the value %v a task's middleware added", v)
		}
		return inner.HandleBatch(ctx, tasks)
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: 50 * time.Millisecond}, srq.WorkerConfig{
		Concurrency: 1, Logger: quiet, Middleware: []srq.Middleware{observe, permanentIfBad},
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	b := nextBatch(t, calls)
	slices.Sort(b.ids)
	if !slices.Equal(b.ids, []string{"bad", "ok1", "ok2"}) {
		t.Fatalf("batch %v, want bad, ok1, ok2 (skip's middleware did not call next)", b.ids)
	}
	waitFor(t, "settled", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked == 2 && st.Dead == 1 && st.Pending == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if saw["ok1"] != nil || saw["ok2"] != nil || !errors.Is(saw["bad"], errBad) {
		t.Errorf("the middleware saw %v, want nil for ok1 and ok2 and a permanent bad value for bad", saw)
	}
	if info := taskInfo(t, q, "bad"); info.State != engine.StateDead {
		t.Errorf("bad is %s, want dead (its middleware made it Permanent)", info.State)
	}
	if info := taskInfo(t, q, "skip"); info.State != engine.StatePending || info.Attempts != 0 {
		t.Errorf("skip is %s after %d attempts, want pending, snoozed by its middleware without an attempt", info.State, info.Attempts)
	}
}

// TestBatchLeasesHeld: tasks that wait to fill a batch, and run in a batch, longer than their
// lease keep it: they run once, on their first attempt, and are acked.
func TestBatchLeasesHeld(t *testing.T) {
	t.Parallel()
	redistest.SharedReal(t, "leases of a second or less, which the extender cannot keep on the embedded Redis under -race")
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	const lease = 250 * time.Millisecond
	if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1}, {Value: 2}}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	h := srq.BatchHandlerFunc[int](func(ctx context.Context, tasks []*srq.Task[int]) error {
		calls.Add(1)
		for _, task := range tasks {
			if task.Attempt != 1 {
				t.Errorf("task %s on attempt %d, want 1", task.ID, task.Attempt)
			}
		}
		select { // the work: longer than a lease
		case <-time.After(2 * lease):
			return nil
		case <-ctx.Done():
			t.Errorf("the batch's context ended: %v", context.Cause(ctx))
			return ctx.Err()
		}
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: 2 * lease}, srq.WorkerConfig{
		Concurrency: 1, Lease: lease, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "both acked", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked == 2
	})
	if st, _ := q.Engine().Stats(ctx); st.Recovered != 0 || calls.Load() != 1 {
		t.Errorf("%d recovered, %d batch calls; want 0 and 1", st.Recovered, calls.Load())
	}
}

// TestBatchShutdownHandsBack: tasks gathered into a batch that has not started go back at
// shutdown without using an attempt, counted as handed back.
func TestBatchShutdownHandsBack(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1}, {Value: 2}, {Value: 3}}); err != nil {
		t.Fatal(err)
	}
	h, calls := recordBatches(nil)
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 100, MaxWait: time.Hour}, srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "the three fetched", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.InFlight == 3
	})
	stop()
	st, err := q.Engine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 3 || st.InFlight != 0 || st.HandedBack != 3 || len(calls) != 0 {
		t.Fatalf("after the stop: %d pending, %d in flight, %d handed back, %d batches run; want 3, 0, 3, 0",
			st.Pending, st.InFlight, st.HandedBack, len(calls))
	}
}

// TestBatchBesideHandlers: NewWorkerOf serves a queue in batches beside a queue with an ordinary
// handler, and RunOnce runs the batches of what is ready at once.
func TestBatchBesideHandlers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	batched, _ := newQueue[int](t, srq.QueueConfig{})
	single, _ := newQueue[int](t, srq.QueueConfig{})
	var msgs []srq.Message[int]
	for i := range 10 {
		msgs = append(msgs, srq.Message[int]{Value: i})
	}
	for _, q := range []*srq.Queue[int]{batched, single} {
		if _, err := q.PublishBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	var singles atomic.Int32
	h, calls := recordBatches(nil)
	w, err := srq.NewWorkerOf(srq.WorkerConfig{Concurrency: 2, Logger: quiet},
		srq.ServeBatches(batched, h, srq.BatchConfig{MaxSize: 4, MaxWait: time.Hour}, nil),
		srq.Serve(single, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
			singles.Add(1)
			return nil
		}), nil))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 20; {
		got, err := w.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += got
	}
	if singles.Load() != 10 {
		t.Errorf("%d ordinary tasks ran, want 10", singles.Load())
	}
	close(calls)
	var sizes []int
	for b := range calls {
		sizes = append(sizes, len(b.values))
	}
	if slices.Max(sizes) > 4 || len(sizes) < 3 || sum(sizes) != 10 {
		t.Errorf("batches of %v, want 10 tasks in batches of at most 4", sizes)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestNewBatchWorkerRefused: bad input fails with ErrInvalid.
func TestNewBatchWorkerRefused(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[int](t, srq.QueueConfig{})
	h := srq.BatchHandlerFunc[int](func(context.Context, []*srq.Task[int]) error { return nil })
	for _, tc := range []struct {
		name string
		h    srq.BatchHandler[int]
		bc   srq.BatchConfig
		cfg  srq.WorkerConfig
	}{
		{name: "nil handler", bc: srq.BatchConfig{}},
		{name: "nil func", h: srq.BatchHandlerFunc[int](nil)},
		{name: "negative MaxSize", h: h, bc: srq.BatchConfig{MaxSize: -1}},
		{name: "negative MaxWait", h: h, bc: srq.BatchConfig{MaxWait: -time.Second}},
		{name: "MaxSize over what the worker holds", h: h, bc: srq.BatchConfig{MaxSize: 20}, cfg: srq.WorkerConfig{Concurrency: 4, Prefetch: 15}},
		{name: "MaxSize over engine.MaxFetch", h: h, bc: srq.BatchConfig{MaxSize: math.MaxInt}},
		{name: "bad worker config", h: h, cfg: srq.WorkerConfig{Lease: time.Millisecond}},
	} {
		if _, err := srq.NewBatchWorker(q, tc.h, tc.bc, tc.cfg); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%s: NewBatchWorker: %v, want ErrInvalid", tc.name, err)
		}
		if _, err := srq.NewWorkerOf(tc.cfg, srq.ServeBatches(q, tc.h, tc.bc, nil)); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%s: NewWorkerOf: %v, want ErrInvalid", tc.name, err)
		}
	}
	for _, cfg := range []srq.WorkerConfig{{}, {Concurrency: 4, Prefetch: 16}} {
		if _, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 20}, cfg); err != nil {
			t.Errorf("MaxSize 20 with %+v: %v", cfg, err)
		}
	}
	// The default Prefetch of a batch worker is Concurrency × MaxSize: 1 + 100 tasks held, where an
	// ordinary worker's adaptive prefetch would hold at most 1 + 64.
	if _, err := srq.NewBatchWorker(q, h, srq.BatchConfig{}, srq.WorkerConfig{Concurrency: 1}); err != nil {
		t.Errorf("the default MaxSize with Concurrency 1: %v", err)
	}
}

// TestBatchOnWorkerRecord: a worker's record counts its running batches and the tasks in them,
// each batch as one running handler.
func TestBatchOnWorkerRecord(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	release := make(chan struct{})
	h := srq.BatchHandlerFunc[int](func(ctx context.Context, _ []*srq.Task[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 2, MaxWait: time.Hour},
		srq.WorkerConfig{Concurrency: 3, Lease: 300 * time.Millisecond, ConsumerID: "batch-card", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	record := func() engine.WorkerRecord {
		recs, err := q.Engine().Workers(ctx, []string{"batch-card"})
		if err != nil || recs[0] == nil {
			return engine.WorkerRecord{Running: -1}
		}
		return *recs[0]
	}
	runWorker(t, w)
	if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1}, {Value: 2}, {Value: 3}, {Value: 4}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two batches of two on the record", func() bool {
		r := record()
		return r.Running == 2 && r.Batches == 2 && r.BatchTasks == 4
	})
	close(release)
	waitFor(t, "no batch on the record", func() bool {
		r := record()
		return r.Running == 0 && r.Batches == 0 && r.BatchTasks == 0
	})
}

// TestBatchGroupPanics: a Group that panics does not end the worker: the tasks it panicked on form
// a group of their own.
func TestBatchGroupPanics(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	var msgs []srq.Message[int]
	for i := range 6 {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: fmt.Sprint(i)}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	group := func(d *srq.Delivery) string {
		if d.ID[0]%2 == 1 {
			panic("odd")
		}
		return "even"
	}
	h, calls := recordBatches(nil)
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: 20 * time.Millisecond, Group: group},
		srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	for ran := 0; ran < 6; {
		b := nextBatch(t, calls)
		for _, v := range b.values {
			if v%2 != b.values[0]%2 {
				t.Fatalf("batch %v mixes the tasks Group panicked on with the others", b.values)
			}
		}
		ran += len(b.values)
	}
}

// TestBatchGroupsFillTheWorker: when every task the worker holds waits in a batch that is not full
// (more groups than room), the batches run at once rather than after MaxWait.
func TestBatchGroupsFillTheWorker(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	var msgs []srq.Message[int]
	for i := range 6 {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Headers: map[string]string{"tenant": fmt.Sprint(i)}}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	h, calls := recordBatches(nil)
	// The worker holds 3 tasks (Concurrency 1 + Prefetch 2), each of its own group; MaxWait is
	// beyond the test's deadline.
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 3, MaxWait: time.Hour, Group: srq.ByHeader("tenant")},
		srq.WorkerConfig{Concurrency: 1, Prefetch: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	for ran := 0; ran < 6; {
		b := nextBatch(t, calls)
		if len(b.values) != 1 {
			t.Fatalf("batch %v, want one task of one group", b.values)
		}
		ran++
	}
}

// TestBatchShutdownCutsOff: a batch still running when ShutdownTimeout passes has its context
// ended with cause ErrShutdown, and its tasks go back without using an attempt.
func TestBatchShutdownCutsOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1, Opts: srq.PublishOpts{ID: "a"}}, {Value: 2, Opts: srq.PublishOpts{ID: "b"}}}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	h := srq.BatchHandlerFunc[int](func(ctx context.Context, _ []*srq.Task[int]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 2, MaxWait: time.Hour},
		srq.WorkerConfig{Concurrency: 1, ShutdownTimeout: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	<-started
	stop()
	if err := <-cause; !errors.Is(err, srq.ErrShutdown) {
		t.Errorf("the batch's context ended with %v, want ErrShutdown", err)
	}
	st, err := q.Engine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A task handed back while a fetch was under way may be fetched again, and handed back again
	// by the stop: at least two hand-backs.
	if st.Pending != 2 || st.InFlight != 0 || st.HandedBack < 2 || st.Rejected != 0 {
		t.Fatalf("after the stop: %d pending, %d in flight, %d handed back, %d rejected; want 2, 0, at least 2, 0",
			st.Pending, st.InFlight, st.HandedBack, st.Rejected)
	}
	for _, id := range []string{"a", "b"} {
		if info := taskInfo(t, q, id); info.Attempts != 0 {
			t.Errorf("task %s used %d attempts, want 0", id, info.Attempts)
		}
	}
}

// TestBatchUndecodablePayload: a task whose payload the queue's codec cannot decode never reaches
// the batch handler: it goes to the dead letters with the decode error, as under a Handler, and the
// other tasks of its fetch run in one batch.
func TestBatchUndecodablePayload(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	// Another producer wrote bytes that are no msgpack value (0xc1 is never used) to the queue.
	if _, err := q.Engine().Publish(ctx, []engine.Message{{ID: "bad", Payload: []byte{0xc1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1, Opts: srq.PublishOpts{ID: "one"}},
		{Value: 2, Opts: srq.PublishOpts{ID: "two"}}}); err != nil {
		t.Fatal(err)
	}
	h, calls := recordBatches(nil)
	w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 10, MaxWait: time.Hour}, srq.WorkerConfig{
		Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if b := nextBatch(t, calls); !slices.Equal(b.ids, []string{"one", "two"}) {
		t.Fatalf("batch %v, want [one two]", b.ids)
	}
	select {
	case b := <-calls:
		t.Fatalf("a second batch %v", b.ids)
	default:
	}
	page, err := q.Engine().DeadLetters(ctx, 0, 10)
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != "bad" ||
		!strings.Contains(page.Letters[0].LastError, "cannot decode") {
		t.Fatalf("dead letters %+v, %v", page.Letters, err)
	}
	if st, err := q.Engine().Stats(ctx); err != nil || st.Acked != 2 || st.Pending != 0 {
		t.Fatalf("stats %+v, %v: want 2 acked, none pending", st, err)
	}
}

// TestBatchOrderedDeath: a task of an ordered partition dead-lettered in a batch (Permanent, or a
// payload the codec cannot decode): the later tasks of its partition in the batch ran with it, so
// they are settled with their own errors, unless its death holds the partition (HoldPartition):
// then they go back, without an attempt used, and run again after the dead letter is requeued.
func TestBatchOrderedDeath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		hold, raw   bool // HoldPartition; the head's payload does not decode
		wantCalls   [][]int
		wantDead    int64
		wantAcked   int64
		wantHanded  int64
		thenRequeue bool
	}{
		{name: "continue, Permanent", wantCalls: [][]int{{1, 2, 3}}, wantDead: 1, wantAcked: 2},
		{name: "continue, undecodable", raw: true, wantCalls: [][]int{{2, 3}}, wantDead: 1, wantAcked: 2},
		{name: "hold, Permanent", hold: true, wantCalls: [][]int{{1, 2, 3}}, wantDead: 1, wantHanded: 2, thenRequeue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cfg := srq.QueueConfig{}
			if tc.hold {
				cfg.OnDeadLetter = srq.HoldPartition
			}
			q, _ := newQueue[int](t, cfg)
			opts := srq.PublishOpts{Partition: "acct", Ordered: true}
			if tc.raw {
				if _, err := q.Engine().Publish(ctx, []engine.Message{{ID: "1", Partition: "!acct", Payload: []byte{0xc1}}}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "1", Partition: "acct", Ordered: true}); err != nil {
				t.Fatal(err)
			}
			for _, v := range []int{2, 3} {
				o := opts
				o.ID = fmt.Sprint(v)
				if _, err := q.Publish(ctx, v, &o); err != nil {
					t.Fatal(err)
				}
			}
			died := false
			h, calls := recordBatches(func(tasks []*srq.Task[int]) error {
				errs := make([]error, len(tasks))
				for i, task := range tasks {
					if task.Value == 1 && !died {
						died, errs[i] = true, srq.Permanent(errors.New("no"))
					}
				}
				return srq.BatchErrors(errs)
			})
			w, err := srq.NewBatchWorker(q, h, srq.BatchConfig{MaxSize: 3, MaxWait: 100 * time.Millisecond}, srq.WorkerConfig{Concurrency: 1, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			var st engine.Stats
			waitFor(t, "the batch settled", func() bool {
				st, err = q.Engine().Stats(ctx)
				return err == nil && st.Dead == tc.wantDead && st.Acked == tc.wantAcked && st.HandedBack == tc.wantHanded
			})
			for _, want := range tc.wantCalls {
				if got := nextBatch(t, calls); !slices.Equal(got.values, want) {
					t.Fatalf("batch %v, want %v", got.values, want)
				}
			}
			if tc.thenRequeue {
				if n, err := q.Requeue(ctx, "1"); err != nil || n != 1 {
					t.Fatal(n, err)
				}
				if got := nextBatch(t, calls); !slices.Equal(got.values, []int{1, 2, 3}) {
					t.Fatalf("after the requeue: batch %v, want [1 2 3]", got.values)
				}
				waitFor(t, "every task acked", func() bool {
					st, err = q.Engine().Stats(ctx)
					return err == nil && st.Acked == 3
				})
			}
			stop()
			select {
			case b := <-calls:
				t.Fatalf("an extra batch %v: the later tasks ran twice", b.values)
			default:
			}
		})
	}
}
