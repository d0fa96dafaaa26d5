package srq_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/middleware"
)

// TestExponentialBackoff: each wait is base doubled per failed attempt, capped at limit, within
// ±20 % jitter, and a limit near the largest Duration does not overflow the doubling into 0 s.
func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		base, limit time.Duration
		attempt     int
		want        time.Duration // before jitter
	}{
		{"first attempt", time.Second, 10 * time.Minute, 1, time.Second},
		{"doubles", time.Second, 10 * time.Minute, 4, 8 * time.Second},
		{"capped", time.Second, 10 * time.Minute, 30, 10 * time.Minute},
		{"many attempts", time.Second, 10 * time.Minute, 1_000_000, 10 * time.Minute},
		{"no overflow near the largest limit", time.Second, math.MaxInt64, 100, math.MaxInt64},
		{"a limit below base wins", 10 * time.Second, time.Second, 3, time.Second},
		{"a zero limit retries at once", time.Second, 0, 5, 0},
		{"a negative base is 0", -time.Second, time.Minute, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			policy := srq.ExponentialBackoff(tc.base, tc.limit)
			for range 100 { // the jitter is random: every draw must be in range
				got := policy(tc.attempt, nil)
				low := time.Duration(float64(tc.want) * 0.8)
				high := time.Duration(math.MaxInt64)
				if h := float64(tc.want) * 1.2; h < math.MaxInt64 { // 2^63: no Duration is that long
					high = time.Duration(h)
				}
				if got < low || got > high || got < 0 {
					t.Fatalf("attempt %d: %v, want %v ±20%% (%v…%v)", tc.attempt, got, tc.want, low, high)
				}
			}
		})
	}
}

// TestMiddlewareRetryDecidesFirst: what errors.md says of the two: WorkerConfig.Retry sets the
// wait after an ordinary error; with middleware.Retry the middleware decides for the errors it
// sees, and the worker's policy is not consulted for them.
func TestMiddlewareRetryDecidesFirst(t *testing.T) {
	t.Parallel()
	for _, withMiddleware := range []bool{false, true} {
		ctx := testCtx(t)
		q, _ := newQueue[int](t, srq.QueueConfig{})
		if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "t"}); err != nil {
			t.Fatal(err)
		}
		var asked atomic.Int32
		cfg := srq.WorkerConfig{Logger: quiet, Retry: func(int, error) time.Duration {
			asked.Add(1)
			return time.Hour
		}}
		if withMiddleware {
			cfg.Middleware = []srq.Middleware{middleware.Retry(middleware.RetryConfig{})}
		}
		w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
			return errors.New("flaky")
		}), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		ti, err := q.Engine().Task(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		wait := ti.AvailableAt.Sub(ti.EnqueuedAt)
		switch {
		case !withMiddleware && (asked.Load() != 1 || wait < 59*time.Minute):
			t.Fatalf("without middleware: the policy asked %d times, the task waits %v; want once, an hour", asked.Load(), wait)
		case withMiddleware && (asked.Load() != 0 || wait > 2*time.Second):
			t.Fatalf("with middleware.Retry: the policy asked %d times, the task waits %v; want never, about 1s", asked.Load(), wait)
		}
	}
}
