package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/logtest"
)

// TestShutdownTimeoutSaysWhatItWaitsFor: when ShutdownTimeout passes, the warning names what holds
// Run up: a handler still running, or, once every handler has returned, the calls that settle
// their tasks, here a hand-back (and a reject) that Redis does not answer. It used to say
// "cancelling running handlers" in both cases, which sends an operator looking for a stuck handler
// when Redis is slow.
func TestShutdownTimeoutSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	const settling = "shutdown timeout: no handler running; waiting for Redis to settle their tasks"
	for _, tc := range []struct {
		name string
		// What the running handler does: runs until shutdown cuts it off ("run"), or returns at
		// the stop, nil ("ack") or an error, which rejects its task ("reject").
		handler string
		timeout time.Duration // short when the handler runs on; else time enough for it to return
		want    string
	}{
		{"a handler still runs", "run", 50 * time.Millisecond, "shutdown timeout: cancelling running handlers"},
		{"only a hand-back", "ack", time.Second, settling},
		{"a hand-back and the handler's reject", "reject", time.Second, settling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, c := newQueue[int](t, srq.QueueConfig{})
			held := newHoldScripts(t, "reject")
			c.AddHook(held)
			t.Cleanup(held.release) // also when the test fails before it releases them
			var msgs []srq.Message[int]
			for i := range 3 {
				msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: fmt.Sprint(i)}})
			}
			if _, err := q.PublishBatch(testCtx(t), msgs); err != nil {
				t.Fatal(err)
			}
			var started atomic.Int32
			stopped := make(chan struct{})
			h := srq.HandlerFunc[int](func(ctx context.Context, _ *srq.Task[int]) error {
				started.Add(1)
				switch tc.handler {
				case "run":
					<-ctx.Done() // cut off by the shutdown timeout
					return ctx.Err()
				case "reject":
					<-stopped // returns right after Run's context ended; the reject is held
					return errors.New("failed")
				}
				<-stopped
				return nil
			})
			logs := &logtest.Recorder{}
			w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 1, Prefetch: 2,
				ShutdownTimeout: tc.timeout, Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			waitFor(t, "a running handler and two tasks prefetched", func() bool {
				st, _ := q.Engine().Stats(testCtx(t))
				return started.Load() == 1 && st.InFlight == 3
			})
			cancel()
			close(stopped)
			// The prefetched tasks' hand-back is held in Redis until the warning is out.
			waitFor(t, "the shutdown timeout's warning", func() bool { return len(logs.Find("shutdown timeout:")) > 0 })
			held.release()
			select {
			case err := <-ran:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Run did not return")
			}
			if got := logs.Find("shutdown timeout:"); len(got) != 1 || got[0].Message != tc.want {
				t.Fatalf("logged %v, want one %q", got, tc.want)
			}
		})
	}
}

// holdScripts is a go-redis hook that holds the calls of some scripts until release, as a Redis
// that does not answer them would.
type holdScripts struct {
	processHookOnly
	shas scriptSet
	gate chan struct{}
	once sync.Once
}

func newHoldScripts(t *testing.T, scripts ...string) *holdScripts {
	t.Helper()
	return &holdScripts{shas: scriptSHAs(t, scripts...), gate: make(chan struct{})}
}

// release lets the held calls and every later one through.
func (h *holdScripts) release() { h.once.Do(func() { close(h.gate) }) }

func (h *holdScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.shas.runs(cmd) {
			select {
			case <-h.gate:
			case <-ctx.Done():
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}
