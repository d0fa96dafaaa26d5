package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

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

// TestLoggingLevels: Logging's level and message follow what becomes of the task, as the engine
// decides it, not the error alone: a failure on the task's last attempt is a dead-lettering
// (Warn), also when Retry inside turned it into a rejection.
func TestLoggingLevels(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	retry := middleware.Retry(middleware.RetryConfig{Policy: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }})
	for _, tc := range []struct {
		name        string
		err         error
		maxAttempts int
		retry       bool
		want        string // the line's level and message
		dead        bool
	}{
		{"done", nil, 3, false, `level=DEBUG msg="task done"`, false},
		{"ordinary error", boom, 3, false, `level=INFO msg="task failed"`, false},
		{"rejected", srq.RejectWithDelay(time.Second, boom), 3, false, `level=INFO msg="task handed back"`, false},
		{"retried by Retry", boom, 3, true, `level=INFO msg="task handed back"`, false},
		{"snoozed on the last attempt", srq.Snooze(time.Second), 1, false, `level=INFO msg="task handed back"`, false},
		{"permanent", srq.Permanent(boom), 3, false, `level=WARN msg="task failed permanently"`, true},
		{"last attempt", boom, 1, false, `level=WARN msg="task failed on its last attempt"`, true},
		{"last attempt, rejected", srq.Reject(boom), 1, false, `level=WARN msg="task failed on its last attempt"`, true},
		{"last attempt through Retry", boom, 1, true, `level=WARN msg="task failed on its last attempt"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			mws := []srq.Middleware{middleware.Logging(logger)}
			if tc.retry {
				mws = append(mws, retry)
			}
			h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return tc.err })
			o := srqtest.Process[int](t, h, 1, &srq.PublishOpts{MaxAttempts: tc.maxAttempts}, srq.QueueConfig{},
				srq.WorkerConfig{Logger: quiet, Middleware: mws})
			if o.DeadLettered != tc.dead {
				t.Fatalf("dead-lettered %v, want %v: %+v", o.DeadLettered, tc.dead, o)
			}
			if line := logs.String(); !strings.Contains(line, tc.want) {
				t.Fatalf("logged %q, want %s", line, tc.want)
			}
		})
	}
}
