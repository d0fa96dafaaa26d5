package middleware

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/srqueue/srq"
)

// Logging logs one line per delivery with log/slog: at Debug when the task succeeded, at Info when
// it was handed back (rejected, snoozed, retried), at Warn when it failed for good (permanent).
// The line carries the queue, task id, partition, attempt, duration and error. A nil logger means
// slog.Default(), looked up for every delivery so that a later slog.SetDefault applies. Logging
// does not fail: it returns the error it got from the handler unchanged.
func Logging(logger *slog.Logger) srq.Middleware {
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			start := time.Now()
			err := next(ctx, d)
			l := logger
			if l == nil {
				l = slog.Default()
			}
			level, msg := slog.LevelDebug, "task done"
			var rej *srq.RejectError
			var perm *srq.PermanentError
			switch {
			case err == nil:
			case errors.As(err, &perm):
				level, msg = slog.LevelWarn, "task failed permanently"
			case errors.As(err, &rej):
				level, msg = slog.LevelInfo, "task handed back"
			default:
				level, msg = slog.LevelInfo, "task failed"
			}
			if l.Enabled(ctx, level) {
				attrs := []slog.Attr{slog.String("queue", d.Queue), slog.String("task", d.ID),
					slog.String("partition", string(d.Partition)), slog.Int("attempt", d.Attempt),
					slog.Duration("took", time.Since(start))}
				if rej != nil {
					attrs = append(attrs, slog.Duration("retry_in", rej.Delay))
				}
				if err != nil {
					attrs = append(attrs, slog.Any("err", err))
				}
				l.LogAttrs(ctx, level, msg, attrs...)
			}
			return err
		}
	}
}
