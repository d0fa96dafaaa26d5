package srq_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newQueue returns a queue of T on a fresh queue name of the shared test Redis.
func newQueue[T any](t *testing.T, cfg srq.QueueConfig) (*srq.Queue[T], *redis.Client) {
	t.Helper()
	c := redistest.Client(t)
	cfg.Name = redistest.Queue(t)
	q, err := srq.NewQueue[T](c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q, c
}

// runWorker starts w.Run in the background and returns a stop function that cancels it and
// waits for Run to return, failing the test on an error.
func runWorker(t *testing.T, w *srq.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
