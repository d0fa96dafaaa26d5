package middleware_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// TestLoggingPermanentCutOffIsHandedBack: a handler cut off by shutdown that returns a Permanent
// error wrapping its context's end has its task handed back by the worker (pool.settle), not
// dead-lettered: Logging (and Tracing and Metrics, through outcome) must say so.
func TestLoggingPermanentCutOffIsHandedBack(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(srq.ErrShutdown)
	work := middleware.Logging(logger)(func(ctx context.Context, _ *srq.Delivery) error {
		return srq.Permanent(fmt.Errorf("calling out: %w", ctx.Err()))
	})
	d := &srq.Delivery{Delivery: engine.Delivery{ID: "t", Attempt: 1, MaxAttempts: 3}, Queue: "q"}
	_ = work(ctx, d)
	if line := logs.String(); !strings.Contains(line, `level=INFO msg="task handed back"`) {
		t.Fatalf("logged %q, want the hand-back the worker does", line)
	}
}
