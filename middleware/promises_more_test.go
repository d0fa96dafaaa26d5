package middleware_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// TestPromiseRateLimitUnaskedWaitsOneSecond: docs/middleware.md "When Redis cannot be asked, the
// task waits one second, again without using an attempt". The limiter asks a Redis that refuses
// connections; the task does not run, and goes back available one second after the server took
// it back, on its first attempt still. The test does not wait that second: it reads the task.
func TestPromiseRateLimitUnaskedWaitsOneSecond(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := redistest.Client(t)
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort() // free a moment ago: nothing answers there
	if err != nil {
		t.Fatal(err)
	}
	gone := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = gone.Close() })
	unasked, err := srq.NewQueue[int](gone, srq.QueueConfig{Name: q.Name()})
	if err != nil {
		t.Fatal(err)
	}
	limit, err := middleware.RateLimit(unasked, middleware.RateLimitConfig{PerQueue: middleware.Rate{Limit: 1000, Per: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran.Add(1)
		return nil
	}), srq.WorkerConfig{Logger: quiet, PollWait: 50 * time.Millisecond, Middleware: []srq.Middleware{limit}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	id, err := q.Publish(ctx, 1, &srq.PublishOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(ctx, w)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var info engine.TaskInfo
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if info, err = q.Engine().Task(ctx, id.ID); err != nil {
			t.Fatal(err)
		}
		if info.LastError != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task was never sent back: %+v", info)
		}
	}
	after, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Errorf("the handler ran %d times though the limits could not be asked", ran.Load())
	}
	if !strings.Contains(info.LastError, "rate limit") || info.Attempts != 0 {
		t.Errorf("task %+v: want the rate limit's error and no attempt used (MaxAttempts 1: it would be dead)", info)
	}
	// Sent back between before and after, by the server's clock, to one second later (the
	// server's clock counts whole milliseconds).
	lo, hi := before.Add(time.Second).Truncate(time.Millisecond), after.Add(time.Second)
	if info.AvailableAt.Before(lo) || info.AvailableAt.After(hi) {
		t.Errorf("the task is available again at %v, want one second after it was sent back: in [%v, %v]",
			info.AvailableAt, lo, hi)
	}
}
