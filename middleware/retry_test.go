package middleware_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
	"github.com/srqueue/srq/srqtest"
)

func exact() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.RandomizationFactor, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 3, 0, 2*time.Second, 0
	b.Reset()
	return b
}

func run(mw srq.Middleware, attempt int, enqueued time.Time, err error) error {
	d := &srq.Delivery{Delivery: engine.Delivery{ID: "t", Attempt: attempt, EnqueuedAt: enqueued}}
	return mw(func(context.Context, *srq.Delivery) error { return err })(context.Background(), d)
}

func TestRetryDelaysFollowThePolicy(t *testing.T) {
	t.Parallel()
	mw := middleware.Retry(middleware.RetryConfig{Policy: exact})
	boom := errors.New("boom")
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 300 * time.Millisecond,
		3: 900 * time.Millisecond, 4: 2 * time.Second, 9: 2 * time.Second} {
		var rej *srq.RejectError
		err := run(mw, attempt, time.Now(), boom)
		if !errors.As(err, &rej) || rej.Delay != want || !errors.Is(err, boom) || rej.NotAttempt {
			t.Errorf("attempt %d: %v, want a reject after %v wrapping the error", attempt, err, want)
		}
	}
}

// TestDefaultBackoffIsTheWorkersPolicy: Retry's default policy and the worker's
// (srq.DefaultRetryPolicy) wait alike after every attempt: 1s×2^(n-1) up to 10 minutes, spread
// evenly over ±20%. Each attempt is sampled 2,000 times: both stay inside the ±20% band and reach
// within 2% of both its ends.
func TestDefaultBackoffIsTheWorkersPolicy(t *testing.T) {
	t.Parallel()
	def := middleware.Retry(middleware.RetryConfig{})
	boom := errors.New("boom")
	for attempt := 1; attempt <= 14; attempt++ {
		nominal := min(time.Second<<(attempt-1), 10*time.Minute)
		for name, delay := range map[string]func() time.Duration{
			"middleware.Retry": func() time.Duration {
				var rej *srq.RejectError
				if err := run(def, attempt, time.Now(), boom); !errors.As(err, &rej) {
					t.Fatalf("attempt %d: %v", attempt, err)
				}
				return rej.Delay
			},
			"srq.DefaultRetryPolicy": func() time.Duration { return srq.DefaultRetryPolicy(attempt, boom) },
		} {
			lo, hi := math.Inf(1), math.Inf(-1)
			for range 2000 {
				r := float64(delay()) / float64(nominal)
				lo, hi = min(lo, r), max(hi, r)
			}
			if lo < 0.8 || hi > 1.2 || lo > 0.82 || hi < 1.18 {
				t.Errorf("%s, attempt %d: waits from %.3f to %.3f × %v, want from about 0.8 to 1.2", name, attempt, lo, hi, nominal)
			}
		}
	}
}

func TestRetryLeavesDecisionsAlone(t *testing.T) {
	t.Parallel()
	mw := middleware.Retry(middleware.RetryConfig{Policy: exact})
	for _, err := range []error{nil, srq.Permanent(errors.New("x")), srq.RejectWithDelay(time.Hour, nil), srq.Snooze(time.Minute)} {
		if got := run(mw, 1, time.Now(), err); got != err {
			t.Errorf("%v became %v", err, got)
		}
	}
}

// TestRetryLeavesCutOffsAlone: once the worker cut the handler off (shutdown, or the lease lost),
// Retry returns the handler's error as it is, even one it would not retry: the task did not fail,
// and a Permanent made of the context's end would ask the worker to dead-letter it.
func TestRetryLeavesCutOffsAlone(t *testing.T) {
	t.Parallel()
	mw := middleware.Retry(middleware.RetryConfig{Policy: exact, Retryable: func(error) bool { return false }})
	for _, cause := range []error{srq.ErrShutdown, srq.ErrLeaseLost} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		d := &srq.Delivery{Delivery: engine.Delivery{ID: "t", Attempt: 1, EnqueuedAt: time.Now()}}
		err := mw(func(ctx context.Context, _ *srq.Delivery) error { return ctx.Err() })(ctx, d)
		if err != context.Canceled {
			t.Errorf("cut off with %v: %v, want the handler's context.Canceled unchanged", cause, err)
		}
	}
	// A context that ends for another reason (the caller's deadline) is the handler's failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &srq.Delivery{Delivery: engine.Delivery{ID: "t", Attempt: 1, EnqueuedAt: time.Now()}}
	var perm *srq.PermanentError
	if err := mw(func(ctx context.Context, _ *srq.Delivery) error { return ctx.Err() })(ctx, d); !errors.As(err, &perm) {
		t.Errorf("a context ended by its caller: %v, want Permanent (Retryable refuses every error)", err)
	}
}

func TestRetryGivesUp(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var perm *srq.PermanentError
	notRetryable := middleware.Retry(middleware.RetryConfig{Retryable: func(err error) bool { return !errors.Is(err, boom) }})
	if err := run(notRetryable, 1, time.Now(), boom); !errors.As(err, &perm) || !errors.Is(err, boom) {
		t.Errorf("not retryable: %v", err)
	}
	stops := middleware.Retry(middleware.RetryConfig{Policy: func() backoff.BackOff {
		return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Second), 2)
	}})
	if err := run(stops, 2, time.Now(), boom); errors.As(err, &perm) {
		t.Errorf("attempt 2 of 2 retries: %v", err)
	}
	if err := run(stops, 3, time.Now(), boom); !errors.As(err, &perm) {
		t.Errorf("policy stopped: %v", err)
	}
	elapsed := middleware.Retry(middleware.RetryConfig{Policy: exact, MaxElapsedTime: time.Hour})
	if err := run(elapsed, 1, time.Now().Add(-59*time.Minute), boom); errors.As(err, &perm) {
		t.Errorf("within the time: %v", err)
	}
	if err := run(elapsed, 1, time.Now().Add(-time.Hour), boom); !errors.As(err, &perm) {
		t.Errorf("time used up: %v", err)
	}
}

// TestRetryInAWorker: through a real worker and Redis, a failing task is handed back with the
// policy's delay and keeps its attempt count.
func TestRetryInAWorker(t *testing.T) {
	t.Parallel()
	h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return errors.New("flaky") })
	before := time.Now()
	o := srqtest.Process[int](t, h, 1, nil, srq.QueueConfig{},
		srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Retry(middleware.RetryConfig{Policy: exact})}})
	if !o.Retried || o.Attempts != 1 || o.LastError != "flaky" {
		t.Fatalf("%+v", o)
	}
	if d := o.RetryAt.Sub(before); d < 100*time.Millisecond || d > 5*time.Second {
		t.Fatalf("retry at +%v, want about 100ms", d)
	}
}
