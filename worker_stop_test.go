package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/logtest"
	"github.com/srqueue/srq/internal/redistest"
)

// TestRunLeavesConsumers: a worker that stopped is no longer in any shard's consumers list, so
// inspect shows no live consumer at once rather than for 30 s after its last fetch.
func TestRunLeavesConsumers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{Shards: 2})
	consumer := "leaver-" + redistest.Queue(t)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
		srq.WorkerConfig{ConsumerID: consumer, PollWait: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() (n int) {
		for _, eng := range q.Shards() {
			if err := c.ZScore(ctx, eng.Keys().Consumers(), consumer).Err(); err == nil {
				n++
			} else if !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
		}
		return n
	}
	stop := runWorker(t, w)
	waitFor(t, "the worker listed in both shards", func() bool { return listed() == 2 })
	in, err := inspect.New(c, inspect.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := in.Stats(ctx, q.Name()); err != nil || st.LiveConsumers != 1 {
		t.Fatalf("while running: %d live consumers, %v; want 1", st.LiveConsumers, err)
	}
	stop()
	if n := listed(); n != 0 {
		t.Fatalf("after Run returned the worker is listed in %d shards, want none", n)
	}
	if st, err := in.Stats(ctx, q.Name()); err != nil || st.LiveConsumers != 0 || len(st.Consumers) != 0 {
		t.Fatalf("after Run returned: %d live consumers %v, %v; want none", st.LiveConsumers, st.Consumers, err)
	}
}

// TestRunLogsShutdownStart: when Run's context ends, the worker says once, at Info, that it shuts
// down, with how many handlers are running and how long it waits for them (ShutdownTimeout).
func TestRunLogsShutdownStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	for i := range 3 {
		if _, err := q.Publish(ctx, i, &srq.PublishOpts{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var running atomic.Int32
	release := make(chan struct{})
	h := srq.HandlerFunc[int](func(ctx context.Context, _ *srq.Task[int]) error {
		running.Add(1)
		<-release // ignores its context: shutdown waits for it
		return nil
	})
	logs := &logtest.Recorder{}
	const timeout = 42 * time.Second
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 2, Prefetch: -1, ShutdownTimeout: timeout,
		Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	waitFor(t, "2 running handlers", func() bool { return running.Load() == 2 })
	if got := logs.Find("shutting down"); len(got) != 0 {
		t.Fatalf("logged %v before the stop", got)
	}
	cancel()
	waitFor(t, "the shutdown's log", func() bool { return len(logs.Find("shutting down")) > 0 })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := logs.Find("shutting down")
	if len(got) != 1 {
		t.Fatalf("logged %d shutdown records, want 1: %v", len(got), got)
	}
	rec := got[0]
	if rec.Level != slog.LevelInfo || logtest.Attr(rec, "running") != int64(2) || logtest.Attr(rec, "timeout") != timeout {
		t.Fatalf("%s %q running=%v timeout=%v; want Info, running=2, timeout=%v", rec.Level, rec.Message,
			logtest.Attr(rec, "running"), logtest.Attr(rec, "timeout"), timeout)
	}
}

// TestDefaultConsumerID: a worker without a ConsumerID is listed under its host name, its process
// id and a random suffix (in Kubernetes, the host name is the pod's name).
func TestDefaultConsumerID(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
		srq.WorkerConfig{PollWait: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	var ids []string
	waitFor(t, "the worker listed", func() bool {
		ids, _ = c.ZRange(ctx, q.Engine().Keys().Consumers(), 0, -1).Result()
		return len(ids) == 1
	})
	stop()
	host, _ := os.Hostname()
	prefix := fmt.Sprintf("%s-%d-", host, os.Getpid())
	if !strings.HasPrefix(ids[0], prefix) || len(ids[0]) != len(prefix)+4 {
		t.Fatalf("consumer %q, want %s and 4 hex digits", ids[0], prefix)
	}
}
