package srq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type order struct {
	User  string
	Seq   int
	Items []string
}

func TestTypedRoundTripEveryCodec(t *testing.T) {
	t.Parallel()
	for _, c := range []codec.Codec{codec.MsgPack{}, codec.JSON{}} {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[order](t, srq.QueueConfig{Codec: c})
			want := order{User: "ü", Seq: 7, Items: []string{"a", "b"}}
			if _, err := q.Publish(ctx, want, &srq.PublishOpts{Partition: "u1", Ordered: true, Headers: map[string]string{"k": "v"}}); err != nil {
				t.Fatal(err)
			}
			got := make(chan *srq.Task[order], 1)
			w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, task *srq.Task[order]) error {
				got <- task
				return nil
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			task := <-got
			stop()
			if fmt.Sprint(task.Value) != fmt.Sprint(want) || task.Partition != "!u1" || task.Headers["k"] != "v" ||
				task.Attempt != 1 || task.MaxAttempts != srq.DefaultMaxAttempts || task.Queue != q.Name() {
				t.Fatalf("task %+v", task)
			}
		})
	}
	t.Run("raw", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[[]byte](t, srq.QueueConfig{Codec: codec.Raw{}})
		if _, err := q.Publish(ctx, []byte{0, 255}, nil); err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		w, _ := srq.NewWorker(q, srq.HandlerFunc[[]byte](func(ctx context.Context, task *srq.Task[[]byte]) error {
			got <- task.Value
			return nil
		}), srq.WorkerConfig{Logger: quiet})
		runWorker(t, w)
		if v := <-got; len(v) != 2 || v[1] != 255 {
			t.Fatalf("%v", v)
		}
	})
}

func TestDecodeFailureDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[order](t, srq.QueueConfig{})
	// Another producer wrote a payload of another type to the same queue.
	other, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name(), Codec: codec.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Publish(ctx, "not an order", &srq.PublishOpts{ID: "bad"}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	w, _ := srq.NewWorker(q, srq.HandlerFunc[order](func(context.Context, *srq.Task[order]) error {
		calls.Add(1)
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	stop := runWorker(t, w)
	waitFor(t, "the dead letter", func() bool {
		st, _ := q.Engine().Stats(ctx)
		return st.Dead == 1
	})
	stop()
	page, _ := q.Engine().DeadLetters(ctx, 0, 1)
	if l := page.Letters[0]; l.ID != "bad" || l.Attempts != 1 || !strings.Contains(l.LastError, "cannot decode") {
		t.Fatalf("dead letter %+v", l)
	}
	if calls.Load() != 0 {
		t.Fatal("the handler ran on an undecodable payload")
	}
}

// TestOrderedHistory: 1,000 ordered partitions × 50 tasks, 16 handlers; every seventh task fails
// on its first attempt. The recorded history must show every partition's tasks run in publish
// order (a failed task runs again before any later task of its partition runs) and never two of
// one partition running at once.
func TestOrderedHistory(t *testing.T) {
	t.Parallel()
	// Many partitions: one task of each per fetch. Few partitions: fetches take runs of several
	// tasks of one partition, which a failure hands back together.
	for _, size := range []struct{ parts, each int }{{1000, 50}, {4, 100}} {
		t.Run(fmt.Sprintf("%dx%d", size.parts, size.each), func(t *testing.T) {
			t.Parallel()
			testOrderedHistory(t, size.parts, size.each)
		})
	}
}

func testOrderedHistory(t *testing.T, parts, each int) {
	if testing.Short() {
		parts, each = min(parts, 100), min(each, 20)
	}
	// On the embedded Redis, 50,000 tasks take minutes under -race.
	parts, each = redistest.Size(t, parts, min(parts, 100)), redistest.Size(t, each, min(each, 20))
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	for i := 0; i < each; i++ {
		msgs := make([]srq.Message[int], 0, parts)
		for p := 0; p < parts; p++ {
			msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: fmt.Sprint(p), Ordered: true}})
		}
		if _, err := q.PublishBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		next     = map[string]int{}
		running  = map[string]bool{}
		problems []string
		done     atomic.Int64
	)
	h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		p := string(task.Partition)
		mu.Lock()
		if running[p] {
			problems = append(problems, fmt.Sprintf("%s: two tasks at once", p))
		}
		running[p] = true
		if next[p] != task.Value {
			problems = append(problems, fmt.Sprintf("%s: got %d (attempt %d), want %d", p, task.Value, task.Attempt, next[p]))
		}
		fail := task.Value%7 == 3 && task.Attempt == 1
		if !fail {
			next[p] = task.Value + 1
		}
		mu.Unlock()
		mu.Lock()
		running[p] = false
		mu.Unlock()
		if fail {
			return errors.New("first attempts of every seventh task fail")
		}
		done.Add(1)
		return nil
	})
	w, _ := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 16, Logger: quiet,
		Retry: func(int, error) time.Duration { return time.Millisecond }})
	stop := runWorker(t, w)
	waitFor(t, "every task", func() bool { return done.Load() == int64(parts*each) })
	stop()
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems[:min(len(problems), 20)] {
		t.Error(p)
	}
	st, _ := q.Engine().Stats(ctx)
	if st.Pending != 0 || st.InFlight != 0 || st.Acked != int64(parts*each) {
		t.Fatalf("stats %+v", st)
	}
}

func TestLongHandlerKeepsItsLease(t *testing.T) {
	t.Parallel()
	redistest.SharedReal(t, "leases of a second or less, which the extender cannot keep on the embedded Redis under -race")
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	const lease = time.Second
	var runs atomic.Int32
	finished := make(chan error, 1)
	h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		runs.Add(1)
		select {
		case <-time.After(3 * lease):
			finished <- nil
		case <-ctx.Done():
			finished <- context.Cause(ctx)
		}
		return nil
	})
	// Two workers: the second would get the task if the first's lease lapsed.
	for i := 0; i < 2; i++ {
		w, _ := srq.NewWorker(q, h, srq.WorkerConfig{Lease: lease, RecoverInterval: lease / 4, Logger: quiet})
		runWorker(t, w)
	}
	if err := <-finished; err != nil {
		t.Fatalf("handler context ended: %v", err)
	}
	waitFor(t, "the ack", func() bool {
		st, _ := q.Engine().Stats(ctx)
		return st.Acked == 1
	})
	if runs.Load() != 1 {
		t.Fatalf("ran %d times", runs.Load())
	}
}

func TestLostLeaseCancelsHandler(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	w, _ := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}), srq.WorkerConfig{Lease: 300 * time.Millisecond, Logger: quiet})
	runWorker(t, w)
	<-started
	// Someone else takes the task over: the lease is no longer the worker's. (The partition is
	// paused first so the worker cannot fetch the task again.)
	ti, err := q.Engine().Task(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Engine().Pause(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Engine().Reject(ctx, []engine.Rejection{{Receipt: engine.Receipt{ID: "t", Token: ti.Token}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, srq.ErrLeaseLost) {
			t.Fatalf("cause %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context did not end when its lease was lost")
	}
}

// TestHandlerContextEndsWithTheLease: when leases cannot be extended (Redis stops answering), the
// handler's context ends at the lease deadline, not later.
func TestHandlerContextEndsWithTheLease(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "a process to stop")
	ctx := testCtx(t)
	c := srv.Client(t)
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	const lease = 400 * time.Millisecond
	started := make(chan time.Time, 1)
	ended := make(chan error, 1)
	w, _ := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		started <- time.Now()
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return ctx.Err()
	}), srq.WorkerConfig{Lease: lease, Logger: quiet, ShutdownTimeout: time.Second})
	stop := runWorker(t, w)
	begin := <-started
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Signal(syscall.SIGCONT) }()
	select {
	case cause := <-ended:
		if !errors.Is(cause, srq.ErrLeaseLost) {
			t.Fatalf("cause %v", cause)
		}
		if late := time.Since(begin) - lease; late > time.Second {
			t.Fatalf("context ended %v after the lease", late)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context outlived its lease")
	}
	_ = srv.Signal(syscall.SIGCONT)
	stop()
}

// TestLostLeaseStopsTheUnit: when the lease of an ordered run is lost while its first task runs,
// the later tasks of the run are not run by this worker: another may hold them now.
func TestLostLeaseStopsTheUnit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	for _, id := range []string{"A", "B"} {
		if _, err := q.Publish(ctx, id, &srq.PublishOpts{ID: id, Partition: "p", Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	var ranB atomic.Bool
	w, _ := srq.NewWorker(q, srq.HandlerFunc[string](func(hctx context.Context, task *srq.Task[string]) error {
		if task.Value == "B" {
			ranB.Store(true)
			return nil
		}
		// Another party takes the partition over: A's reject takes B back with it, so both
		// leases go stale. The handler ignores its context's end and returns nil.
		if err := q.Engine().Pause(ctx, task.Partition); err != nil {
			return err
		}
		if _, err := q.Engine().Reject(ctx, []engine.Rejection{{Receipt: task.Receipt(), NotAttempt: true}}); err != nil {
			return err
		}
		<-hctx.Done()
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Prefetch: 1, Lease: 90 * time.Millisecond, Logger: quiet})
	n, err := w.RunOnce(ctx)
	if err != nil || n != 2 {
		t.Fatalf("RunOnce: %d, %v (want a run of 2)", n, err)
	}
	if ranB.Load() {
		t.Fatal("B ran after the run's lease was lost")
	}
	st, _ := q.Engine().Stats(ctx)
	if st.Pending != 2 || st.InFlight != 0 {
		t.Fatalf("stats %+v: want A and B pending", st)
	}
}

// TestTaskHeldAgainWhileItsOldHandlerRuns: a task whose lease this worker lost is fetched by the
// same worker again while its first handler, ignoring its context, still runs. When that first
// handler ends, the second delivery must keep its lease extended: settling one delivery must not
// make the worker forget the other.
func TestTaskHeldAgainWhileItsOldHandlerRuns(t *testing.T) {
	t.Parallel()
	redistest.SharedReal(t, "leases of a second or less, which the extender cannot keep on the embedded Redis under -race")
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	// Long enough that a loaded machine (CI runs every package at once, with -race) extends it in
	// time: an expiry there sends the task to recovery and fails the test for the wrong reason.
	const lease = 600 * time.Millisecond
	var runs atomic.Int32
	started1, started2, release1 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	second := make(chan error, 1)
	w, _ := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		if runs.Add(1) == 1 {
			close(started1)
			<-release1 // ignores its context
			return nil
		}
		close(started2)
		select {
		case <-time.After(4 * lease):
			second <- nil
		case <-ctx.Done():
			second <- context.Cause(ctx)
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 2, Lease: lease, Logger: quiet})
	runWorker(t, w)
	<-started1
	ti, err := q.Engine().Task(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// The task is taken back (as recovery would after a lost lease) and fetched again.
	if _, err := q.Engine().Reject(ctx, []engine.Rejection{{Receipt: engine.Receipt{ID: "t", Token: ti.Token}}}); err != nil {
		t.Fatal(err)
	}
	<-started2
	close(release1)
	if err := <-second; err != nil {
		t.Fatalf("the second delivery's handler lost its context: %v", err)
	}
	waitFor(t, "the second delivery's ack", func() bool {
		st, _ := q.Engine().Stats(ctx)
		return st.Acked == 1
	})
}

// TestWorkerConfigRefused: NewWorker refuses a configuration whose fetch of every free slot the
// engine would refuse, or that would fail later (a nil middleware), before anything runs.
func TestWorkerConfigRefused(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[order](t, srq.QueueConfig{})
	h := srq.HandlerFunc[order](func(context.Context, *srq.Task[order]) error { return nil })
	for _, cfg := range []srq.WorkerConfig{
		{Concurrency: -1},
		{Lease: time.Millisecond},
		{Concurrency: engine.MaxFetch + 1, Prefetch: -1},
		{Concurrency: engine.MaxFetch/2 + 1},    // Prefetch defaults to Concurrency
		{Concurrency: 1, Prefetch: math.MaxInt}, // the sum overflows: Run would panic making the slots
		{Middleware: []srq.Middleware{nil}},
		{Middleware: []srq.Middleware{func(srq.WorkFunc) srq.WorkFunc { return nil }}},
	} {
		if _, err := srq.NewWorker(q, h, cfg); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("NewWorker with %+v: %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: engine.MaxFetch / 2}); err != nil {
		t.Errorf("NewWorker at the limit: %v", err)
	}
}
