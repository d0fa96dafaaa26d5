package middleware

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/srqueue/srq"
)

// Logging logs one line per delivery with log/slog, by what becomes of the task: at Debug when it
// succeeded or waits (srq.WaitChildren, WaitSignal, Sleep); at Info when it goes back to run again (rejected, snoozed, retried, or handed back at
// shutdown or after a lost lease) and when Queue.Cancel cancelled it while it ran; at Warn when it
// goes to the dead letters, for a permanent error
// or because the delivery was its last attempt. The line carries the queue, task id, partition,
// attempt, duration, error and, for a rejection that runs again, the delay (retry_in). A nil
// logger means slog.Default(), looked up for every delivery so that a later slog.SetDefault
// applies. Logging does not fail: it returns the error it got from the handler unchanged.
func Logging(logger *slog.Logger) srq.Middleware {
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			start := time.Now()
			err := next(ctx, d)
			l := logger
			if l == nil {
				l = slog.Default()
			}
			// The same judgement as Tracing's and Metrics': by the error alone, a task whose last
			// attempt failed would be logged as going back, and its dead-lettering at no level.
			var rej *srq.RejectError
			level, msg := slog.LevelInfo, "task failed"
			switch outcome(ctx, d, err) {
			case "done":
				level, msg = slog.LevelDebug, "task done"
			case "dead":
				level, msg = slog.LevelWarn, "task failed permanently"
				if !errors.As(err, new(*srq.PermanentError)) {
					msg = "task failed on its last attempt"
				}
			case "handed_back":
				msg = "task handed back"
			case "cancelled":
				msg = "task cancelled"
			case "wait":
				level, msg = slog.LevelDebug, "task waiting"
			default: // retry or snooze
				if errors.As(err, &rej) {
					msg = "task handed back"
				}
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
