package srq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
)

// lateScripts is a go-redis hook that delays the calls of some scripts by a fixed time before
// sending them, as a slow network would, and signals on done (without blocking) as each returns.
type lateScripts struct {
	processHookOnly
	shas  scriptSet
	delay time.Duration
	done  chan struct{}
}

func (h *lateScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.shas.runs(cmd) {
			return next(ctx, cmd)
		}
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		err := next(ctx, cmd)
		select {
		case h.done <- struct{}{}:
		default:
		}
		return err
	}
}

// TestLateExtensionKeepsTheRestOfTheUnit: the tasks of one ordered partition fetched together run
// one after another. When the first one's handler context ends with ErrLeaseLost because the
// extension came back after the lease's deadline, but still in time for Redis (no recovery ran in
// between, so the leases are valid again), and the handler finishes anyway, the later tasks of the
// unit are handed back and run at once, without using an attempt; dropped, they would wait for
// their leases to expire and be recovered, using an attempt each.
func TestLateExtensionKeepsTheRestOfTheUnit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{})
	const lease = 300 * time.Millisecond
	late := &lateScripts{shas: scriptSHAs(t, "extend"), delay: lease + lease/2, done: make(chan struct{}, 1)}
	c.AddHook(late)
	for i := 1; i <= 3; i++ {
		if _, err := q.Publish(ctx, i, &srq.PublishOpts{Partition: "p", Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	type run struct{ value, attempt int }
	ran := make(chan run, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		if task.Value == 1 {
			<-ctx.Done() // the lease's timer fires before the late extension returns
			if !errors.Is(context.Cause(ctx), srq.ErrLeaseLost) {
				t.Errorf("task 1's context ended with %v, want ErrLeaseLost", context.Cause(ctx))
			}
			<-late.done // the extension moved the lease in Redis after all; finish anyway
		}
		ran <- run{task.Value, task.Attempt}
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Prefetch: 2, Lease: lease, RecoverInterval: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	for want := 1; want <= 3; want++ {
		select {
		case r := <-ran:
			if r.value != want || r.attempt != 1 {
				t.Fatalf("ran task %d (attempt %d), want task %d on its first attempt", r.value, r.attempt, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("task %d did not run within 5s: the rest of the unit waits for its leases to expire", want)
		}
	}
}
