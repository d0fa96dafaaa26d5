package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/srqueue/srq"
)

// RetryConfig configures Retry. Zero values mean the documented defaults.
type RetryConfig struct {
	// Policy returns a fresh backoff policy (github.com/cenkalti/backoff/v4); the delay after
	// attempt n is its n-th NextBackOff. A policy that returns backoff.Stop ends the retries: the
	// task is dead-lettered. Default DefaultBackoff: the waits of srq.DefaultRetryPolicy.
	Policy func() backoff.BackOff
	// MaxElapsedTime dead-letters a task whose next retry would come this long after it was
	// first published. Default 0: no limit (the task's max attempts still apply).
	MaxElapsedTime time.Duration
	// Retryable says whether an error is worth retrying; errors it refuses dead-letter the task
	// at once. Default: every error is.
	Retryable func(error) bool
}

// DefaultBackoff is Retry's default policy, the worker's default (srq.DefaultRetryPolicy) as a
// backoff.BackOff: after attempt n it waits 1s×2^(n-1), at most 10 minutes, spread evenly by
// ±20% jitter (so a capped wait lies between 8 and 12 minutes). It never returns backoff.Stop.
func DefaultBackoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Second
	b.Multiplier = 2
	b.RandomizationFactor = 0.2 // ±20%, uniform, around the capped interval: as srq.ExponentialBackoff
	b.MaxInterval = 10 * time.Minute
	b.MaxElapsedTime = 0 // elapsed time is measured from the task's publish, below
	b.Reset()
	return b
}

// Retry turns a handler's ordinary error into srq.RejectWithDelay with the delay its policy gives
// for the task's attempt, or into srq.Permanent when the error is not retryable, the policy stops,
// or the time since publish would pass MaxElapsedTime. Errors that already decide (srq.Reject…,
// srq.Snooze, srq.Permanent) pass through unchanged, and so does any error once the worker cut the
// handler off (its context's cause is srq.ErrShutdown or srq.ErrLeaseLost). The task's max
// attempts still cap the retries: the engine dead-letters a task that rejects its last attempt.
//
// A worker retries ordinary errors without this middleware, by srq.WorkerConfig.Retry (default
// srq.DefaultRetryPolicy, whose waits DefaultBackoff gives too). Use Retry for a policy written
// with github.com/cenkalti/backoff/v4, or to dead-letter errors that Retryable refuses or tasks
// past MaxElapsedTime. Retry itself does not fail.
func Retry(cfg RetryConfig) srq.Middleware {
	if cfg.Policy == nil {
		cfg.Policy = DefaultBackoff
	}
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			err := next(ctx, d)
			var rej *srq.RejectError
			var perm *srq.PermanentError
			var wait *srq.WaitError
			if err == nil || errors.As(err, &rej) || errors.As(err, &perm) || errors.As(err, &wait) {
				return err
			}
			// Cut off by the worker (shutdown, or the lease lost): the task did not fail, and the
			// worker decides what becomes of it; a Permanent made of the context's end here would
			// ask it to dead-letter the task.
			if cause := context.Cause(ctx); errors.Is(cause, srq.ErrShutdown) || errors.Is(cause, srq.ErrLeaseLost) {
				return err
			}
			if cfg.Retryable != nil && !cfg.Retryable(err) {
				return srq.Permanent(err)
			}
			delay := delayFor(cfg.Policy(), d.Attempt)
			if delay == backoff.Stop {
				return srq.Permanent(fmt.Errorf("retry policy stopped after attempt %d: %w", d.Attempt, err))
			}
			if cfg.MaxElapsedTime > 0 && time.Since(d.EnqueuedAt)+delay > cfg.MaxElapsedTime {
				return srq.Permanent(fmt.Errorf("retry time of %v used up: %w", cfg.MaxElapsedTime, err))
			}
			return srq.RejectWithDelay(delay, err)
		}
	}
}

// delayFor is the policy's delay after the given attempt (1 for the first).
func delayFor(b backoff.BackOff, attempt int) time.Duration {
	d := backoff.Stop
	for i := 0; i < max(attempt, 1); i++ {
		if d = b.NextBackOff(); d == backoff.Stop {
			break
		}
	}
	return d
}
