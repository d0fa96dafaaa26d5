package srq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// TestShutdownHandsBackThroughRetryMiddleware: a handler cut off by shutdown returns its
// context's error under a middleware.Retry whose configuration would make it srq.Permanent: the
// error is not worth retrying (Retryable) or the task's retry time is used up (MaxElapsedTime).
// The task did not fail, the worker stopped: it must be handed back, pending with no attempt used,
// not dead-lettered by a deploy: Retry passes a cut-off handler's error through.
func TestShutdownHandsBackThroughRetryMiddleware(t *testing.T) {
	t.Parallel()
	errTemporary := errors.New("temporary")
	for name, cfg := range map[string]middleware.RetryConfig{
		"Retryable":      {Retryable: func(err error) bool { return errors.Is(err, errTemporary) }},
		"MaxElapsedTime": {MaxElapsedTime: time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[int](t, srq.QueueConfig{})
			if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "cut-off"}); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{})
			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, _ *srq.Task[int]) error {
				close(started)
				<-ctx.Done()
				return ctx.Err()
			}), srq.WorkerConfig{ShutdownTimeout: -1, Logger: quiet, Middleware: []srq.Middleware{middleware.Retry(cfg)}})
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			<-started
			stop()
			ti, err := q.Engine().Task(ctx, "cut-off")
			if err != nil || ti.State != engine.StatePending || ti.Attempts != 0 {
				t.Fatalf("%s, attempts %d, last error %q (%v): want pending with no attempt used",
					ti.State, ti.Attempts, ti.LastError, err)
			}
		})
	}
}
