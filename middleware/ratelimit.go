package middleware

import (
	"context"
	"fmt"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// EngineSource is what RateLimit needs of a queue: its engine. *srq.Queue[T] is one.
type EngineSource interface{ Engine() *engine.Engine }

// Rate is a rate limit for RateLimit: Limit tasks per Per, with bursts of up to Burst tasks
// (default 1: evenly spaced). The zero Rate is no limit.
type Rate = engine.Rate

// RateLimitConfig sets the limits RateLimit applies. A zero Rate is no limit.
type RateLimitConfig struct {
	// PerPartition limits each partition on its own.
	PerPartition Rate
	// PerQueue limits the whole queue.
	PerQueue Rate
}

// rateLimitRetry is how long a task waits when its limits could not be asked.
const rateLimitRetry = time.Second

// RateLimit runs a task only when its partition's and its queue's limits allow it, atomically in
// Redis on the server's clock. A task over a limit does not run: it is snoozed (srq.Snooze) for
// exactly the time until the limits allow it, without using an attempt; for an ordered partition
// the whole partition waits. Other partitions are not slowed by one over its own limit. If Redis
// cannot be asked, the task waits a second, without using an attempt, and is tried again. It
// fails with srq.ErrInvalid for a nil q (nil, a nil *srq.Queue[T], or a source whose Engine
// returns nil), a rate with a limit but no period, or a negative burst.
func RateLimit(q EngineSource, cfg RateLimitConfig) (srq.Middleware, error) {
	for name, r := range map[string]Rate{"PerPartition": cfg.PerPartition, "PerQueue": cfg.PerQueue} {
		if r.Limit < 0 || (r.Limit > 0 && r.Per < time.Millisecond) || r.Burst < 0 {
			return nil, fmt.Errorf("%w: %s rate %+v: want a limit of at least 1 per at least 1ms", srq.ErrInvalid, name, r)
		}
	}
	var eng *engine.Engine
	if q != nil {
		eng = q.Engine() // nil for a nil *srq.Queue[T]
	}
	if eng == nil {
		return nil, fmt.Errorf("%w: rate limit: the queue (%T) has no engine", srq.ErrInvalid, q)
	}
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			var ls []engine.Limit
			if cfg.PerPartition.Limit > 0 {
				ls = append(ls, engine.Limit{Name: "p:" + string(d.Partition), Rate: cfg.PerPartition})
			}
			if cfg.PerQueue.Limit > 0 {
				ls = append(ls, engine.Limit{Name: "q", Rate: cfg.PerQueue})
			}
			wait, err := eng.Allow(ctx, ls...)
			if err != nil {
				return &srq.RejectError{Delay: rateLimitRetry, Err: fmt.Errorf("rate limit: %w", err), NotAttempt: true}
			}
			if wait > 0 {
				return srq.Snooze(wait)
			}
			return next(ctx, d)
		}
	}, nil
}
