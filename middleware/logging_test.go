package middleware_test

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/middleware"
	"github.com/srqueue/srq/srqtest"
)

// TestLoggingNilLoggerIsDefault: Logging(nil) logs to slog.Default() and lets a task that
// succeeded be acked (it used to panic after the handler returned, so the task was retried).
// Not parallel: it swaps the process-wide default logger, which no parallel test may see.
func TestLoggingNilLoggerIsDefault(t *testing.T) {
	var logs bytes.Buffer
	prev, prevOut, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer func() {
		// SetDefault also sent the log package's output to the handler above, and setting back
		// the default handler does not send it back.
		slog.SetDefault(prev)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
	}()

	h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
	o := srqtest.Process[int](t, h, 1, nil, srq.QueueConfig{},
		srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Logging(nil)}})
	if o.Err != nil || !o.Acked {
		t.Fatalf("%+v", o)
	}
	if line := logs.String(); !strings.Contains(line, "task done") || !strings.Contains(line, "queue=srqtest") {
		t.Fatalf("default logger got %q", line)
	}
}
