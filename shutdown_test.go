package srq_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// TestGracefulShutdown stops a worker while handlers run and more tasks wait prefetched. Every task
// must end acked or pending again (none leased, none lost), and tasks handed back must not have
// used an attempt, nor be counted as rejected or taken back: Stats.HandedBack counts each once.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	for _, finish := range []bool{true, false} {
		name := "handlers finish within the timeout"
		if !finish {
			name = "handlers cut off by the timeout"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[int](t, srq.QueueConfig{})
			const total = 60
			var msgs []srq.Message[int]
			for i := 0; i < total; i++ {
				o := srq.PublishOpts{ID: fmt.Sprint(i)}
				if i%2 == 0 {
					o.Partition, o.Ordered = fmt.Sprint(i%6), true
				}
				msgs = append(msgs, srq.Message[int]{Value: i, Opts: o})
			}
			if _, err := q.PublishBatch(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var running atomic.Int32
			h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
				running.Add(1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			timeout := 300 * time.Millisecond // the handlers never finish: cut them off soon
			if finish {
				timeout = 10 * time.Second // they finish 50ms after the stop, even on a loaded machine
			}
			w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 4, Prefetch: 8, ShutdownTimeout: timeout, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			waitFor(t, "4 running handlers", func() bool { return running.Load() == 4 })
			const held = 4 + 8 // Concurrency + Prefetch
			waitFor(t, "prefetched tasks", func() bool {
				st, _ := q.Engine().Stats(ctx)
				return st.InFlight == held
			})
			if finish {
				go func() { time.Sleep(50 * time.Millisecond); close(release) }()
			}
			stop()
			st, err := q.Engine().Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.InFlight != 0 || st.Pending+st.Acked != total || st.Dead != 0 {
				t.Fatalf("after shutdown: %+v (want nothing leased, pending+acked = %d)", st, total)
			}
			if st.Rejected != 0 || st.TakenBack != 0 || st.HandedBack != held-st.Acked {
				t.Fatalf("after shutdown: rejected %d, taken back %d, handed back %d; want 0, 0, %d (every task held and not acked, once)",
					st.Rejected, st.TakenBack, st.HandedBack, held-st.Acked)
			}
			if finish && st.Acked != 4 {
				t.Fatalf("acked %d, want the 4 running handlers' tasks", st.Acked)
			}
			if !finish && st.Acked != 0 {
				t.Fatalf("acked %d, want none", st.Acked)
			}
			for i := 0; i < total; i++ {
				ti, err := q.Engine().Task(ctx, fmt.Sprint(i))
				if err != nil {
					continue // acked
				}
				if ti.Attempts != 0 {
					t.Fatalf("task %d handed back with %d attempts used", i, ti.Attempts)
				}
			}
		})
	}
}

// TestShutdownHandsBackWhateverTheHandlerReturns: a handler cut off by shutdown that returns its
// context's cause (or any error) does not use up an attempt: its one-attempt task is pending again.
func TestShutdownHandsBackWhateverTheHandlerReturns(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "once", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	w, _ := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		close(started)
		<-ctx.Done()
		return context.Cause(ctx)
	}), srq.WorkerConfig{ShutdownTimeout: -1, Logger: quiet})
	stop := runWorker(t, w)
	<-started
	stop()
	ti, err := q.Engine().Task(ctx, "once")
	if err != nil || ti.State != engine.StatePending || ti.Attempts != 0 {
		t.Fatalf("%+v %v: want pending with no attempt used", ti, err)
	}
}

// TestShutdownHandsBackWaitingTasksInOneCall: the tasks fetched but not started when Run's context
// ends go back in one reject call per shard, not one per task: on a Redis that does not answer,
// each call waits for its timeout, and shutdown would wait for them one after the other.
func TestShutdownHandsBackWaitingTasksInOneCall(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const total = 17 // one running, 16 waiting
	q, calls := watchedQueueOf(t, total)
	var running atomic.Int32
	h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		running.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 1, Prefetch: total - 1,
		ShutdownTimeout: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "a running handler and every task fetched", func() bool {
		st, _ := q.Engine().Stats(ctx)
		return running.Load() == 1 && st.InFlight == total
	})
	stop()
	// The waiting tasks in one call, the running one in another.
	assertHandedBack(t, q, calls, total, 2)
}

// TestRunOnceCancelledHandsBackInOneCall: when RunOnce's context ends, the fetched tasks no
// handler has started go back in one reject call per shard, as in Run, not one per task.
func TestRunOnceCancelledHandsBackInOneCall(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const total = 17 // one running, 16 waiting
	q, calls := watchedQueueOf(t, total)
	running := make(chan struct{}, 1)
	h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		select {
		case running <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 1, Prefetch: total - 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.RunOnce(runCtx)
		done <- err
	}()
	<-running
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The waiting tasks in one call, the running one in another, and perhaps one more the
	// handler took before the rest were drained.
	assertHandedBack(t, q, calls, total, 3)
}

// assertHandedBack checks that all total tasks of q are pending again, none leased, handed back
// by at most maxCalls reject calls.
func assertHandedBack(t *testing.T, q *srq.Queue[int], calls *callWatch, total int64, maxCalls int) {
	t.Helper()
	st, err := q.Engine().Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.InFlight != 0 || st.Pending != total {
		t.Fatalf("after the stop: %+v, want all %d pending again", st, total)
	}
	if n := calls.calls("reject"); n > maxCalls {
		t.Fatalf("%d reject calls handed back %d tasks, want at most %d", n, total, maxCalls)
	}
}

// watchedQueueOf returns a watched queue (watchedQueue) holding n unordered tasks, ids 0 to n-1.
func watchedQueueOf(t *testing.T, n int) (*srq.Queue[int], *callWatch) {
	t.Helper()
	q, calls := watchedQueue[int](t)
	var msgs []srq.Message[int]
	for i := 0; i < n; i++ {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: fmt.Sprint(i)}})
	}
	if _, err := q.PublishBatch(testCtx(t), msgs); err != nil {
		t.Fatal(err)
	}
	return q, calls
}

// holdCommands is a go-redis hook that holds the commands of one name on keys holding part
// until their context ends, as a Redis that does not answer them would.
type holdCommands struct {
	processHookOnly
	name, part string
}

func (h holdCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == h.name && len(args) >= 2 && strings.Contains(fmt.Sprint(args[1]), h.part) {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// TestShutdownOnASilentRedisBounded: the calls a stopping worker makes after its tasks are
// settled are each bounded in all, however many shards (worker.md): leaving the consumers lists
// (a ZREM a shard) 2 s, deleting the worker's records (a DEL a shard) 5 s. With 4 shards whose
// calls of that kind Redis does not answer, Run returns in about that long, not 4 times it.
func TestShutdownOnASilentRedisBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		hold  holdCommands
		bound time.Duration
	}{
		{"leave the consumers lists", holdCommands{name: "zrem", part: "}:consumers"}, 2 * time.Second},
		{"delete the worker's records", holdCommands{name: "del", part: "}:wk:"}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.Client(t)
			c.AddHook(tc.hold)
			q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t), Shards: 4})
			if err != nil {
				t.Fatal(err)
			}
			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
				srq.WorkerConfig{ConsumerID: "w1", Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(testCtx(t))
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			waitFor(t, "the worker's record", func() bool {
				n, err := c.Exists(testCtx(t), q.Engine().Keys().Base()+"wk:w1").Result()
				return err == nil && n == 1
			})
			stopped := time.Now()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if took := time.Since(stopped); took < tc.bound || took > 2*tc.bound+2*time.Second {
				t.Errorf("Run returned %v after its context ended, want about %v", took, tc.bound)
			}
		})
	}
}
