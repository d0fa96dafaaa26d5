package middleware

import (
	"context"
	"time"

	"github.com/srqueue/srq"
)

// Timeout ends the handler's context after d (cause context.DeadlineExceeded). The context also
// ends, earlier, when the task's lease is lost. A handler that returns because of the timeout
// returns an ordinary error, which Retry (placed outside Timeout) retries. A d of zero or less
// means no deadline: the handler runs with the context it got. Timeout itself does not fail.
func Timeout(d time.Duration) srq.Middleware {
	return func(next srq.WorkFunc) srq.WorkFunc {
		if d <= 0 {
			// A deadline of zero or less would end the context before the handler starts and
			// fail every task, so it is read as "no timeout set".
			return next
		}
		return func(ctx context.Context, dl *srq.Delivery) error {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, dl)
		}
	}
}
