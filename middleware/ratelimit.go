package middleware

import (
	"context"
	"fmt"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// EngineSource is what RateLimit needs of a queue: its engine. *srq.Queue[T] is one.
type EngineSource interface{ Engine() *engine.Engine }

// RateLimitConfig sets the limits RateLimit applies. A zero Rate is no limit.
type RateLimitConfig struct {
	// PerPartition limits each partition on its own.
	PerPartition engine.Rate
	// PerQueue limits the whole queue.
	PerQueue engine.Rate
}

// RateLimit runs a task only when its partition's and its queue's limits allow it, atomically in
// Redis on the server's clock. A task over a limit does not run: it is snoozed (srq.Snooze) for
// exactly the time until the limits allow it, without using an attempt; for an ordered partition
// the whole partition waits. Other partitions are not slowed by one over its own limit. If Redis
// cannot be asked, the task is handed back with the error, as a retry.
func RateLimit(q EngineSource, cfg RateLimitConfig) srq.Middleware {
	eng := q.Engine()
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
				return srq.Reject(fmt.Errorf("rate limit: %w", err))
			}
			if wait > 0 {
				return srq.Snooze(wait)
			}
			return next(ctx, d)
		}
	}
}
