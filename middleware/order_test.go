package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/middleware"
	"github.com/srqueue/srq/srqtest"
)

// TestMiddlewareOrder: the first middleware in WorkerConfig.Middleware is the outermost, and in
// the recommended order Logging (outside Retry) logs Retry's decision.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var trail []string
	mark := func(name string) srq.Middleware {
		return func(next srq.WorkFunc) srq.WorkFunc {
			return func(ctx context.Context, d *srq.Delivery) error {
				trail = append(trail, "in "+name)
				err := next(ctx, d)
				trail = append(trail, "out "+name)
				return err
			}
		}
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		trail = append(trail, "handler")
		return errors.New("boom")
	})
	o := srqtest.Process[int](t, h, 1, nil, srq.QueueConfig{}, srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{
		mark("outer"), middleware.Logging(logger), middleware.Retry(middleware.RetryConfig{Policy: exact}),
		middleware.Timeout(time.Second), mark("inner"),
	}})
	if got := strings.Join(trail, ", "); got != "in outer, in inner, handler, out inner, out outer" {
		t.Fatalf("trail %q", got)
	}
	if !o.Retried {
		t.Fatalf("%+v", o)
	}
	line := logs.String()
	for _, want := range []string{"task handed back", "retry_in=100ms", "attempt=1", "err=", "boom"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
}
