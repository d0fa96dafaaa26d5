// Package srqtest helps test code that uses srq: a Redis for a test, and running one task through
// a handler to see what the worker would do with it.
package srqtest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// NewRedis returns a client for one test, closed when tb ends: the server REDIS_URL names when it
// is set (tests sharing it must use queue names of their own), else an embedded, in-process Redis
// of the test's own. REDIS_URL is read as devredis.Connect reads it: a URL go-redis's ParseURL
// reads, or a bare host:port; one that does not parse fails tb.
func NewRedis(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	var opt *redis.Options
	if url := os.Getenv("REDIS_URL"); url != "" {
		var err error
		// devredis's reading, so that one REDIS_URL serves the examples and the tests alike.
		if opt, err = devredis.ParseURL(url); err != nil {
			tb.Fatalf("srqtest: %v", err)
		}
	} else {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			tb.Fatalf("srqtest: start embedded Redis: %v", err)
		}
		tb.Cleanup(m.Close)
		opt = &redis.Options{Addr: m.Addr()}
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Outcome is what one run of a handler did to its task.
type Outcome struct {
	// Err is what the handler (with the worker's middleware) returned; nil when it succeeded.
	Err error
	// Acked: the task is done.
	Acked bool
	// Retried: the task went back to be tried again at RetryAt (for an ordered partition, the
	// partition waits until then).
	Retried bool
	RetryAt time.Time
	// DeadLettered: the task went to the dead letters with LastError.
	DeadLettered bool
	LastError    string
	// Attempts the task has used, this run included when it counted: 1 for a task acked on its
	// first run, 0 after a snooze (which uses none).
	Attempts int
}

// Process publishes v with opts to a queue of its own on an embedded Redis, runs h over it once
// with a worker configured by cfg (its Logger, Retry and Middleware apply), and reports what
// happened to the task. A task published with a Delay or a future At runs at once: Process moves
// the embedded Redis's clock to its available-at (and RetryAt is counted from there). It fails tb
// when the task could not be published or run.
func Process[T any](tb testing.TB, h srq.Handler[T], v T, opts *srq.PublishOpts, qcfg srq.QueueConfig, cfg srq.WorkerConfig) Outcome {
	tb.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		tb.Fatalf("srqtest: start embedded Redis: %v", err)
	}
	defer m.Close()
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	qcfg.Name = "srqtest"
	q, err := srq.NewQueue[T](c, qcfg)
	if err != nil {
		tb.Fatalf("srqtest: %v", err)
	}
	res, err := q.Publish(ctx, v, opts)
	if err != nil {
		tb.Fatalf("srqtest: publish: %v", err)
	}
	// The shard that holds the task's partition (the only one on a queue of one shard).
	var key partition.Key
	if opts != nil {
		key = partition.Key(opts.Partition)
		if opts.Ordered {
			key = partition.Ordered(opts.Partition)
		}
	}
	eng := q.ShardOf(key)
	// A delayed task runs now: the embedded Redis's clock, which the scripts read, moves to its
	// available-at and stays there.
	published, err := eng.Task(ctx, res.ID)
	if err != nil {
		tb.Fatalf("srqtest: read the task: %v", err)
	}
	if published.AvailableAt.After(time.Now()) {
		m.SetTime(published.AvailableAt)
	}
	var out Outcome
	attempt := 0 // the run's attempt number
	record := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			attempt = d.Attempt
			out.Err = next(ctx, d)
			return out.Err
		}
	}
	cfg.Middleware = append([]srq.Middleware{record}, cfg.Middleware...)
	cfg.Concurrency, cfg.Prefetch = 1, -1
	w, err := srq.NewWorker(q, h, cfg)
	if err != nil {
		tb.Fatalf("srqtest: %v", err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		tb.Fatalf("srqtest: ran %d tasks: %v", n, err)
	}
	ti, err := eng.Task(ctx, res.ID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		out.Acked, out.Attempts = true, attempt
		return out
	case err != nil:
		tb.Fatalf("srqtest: read the task back: %v", err)
	}
	out.Attempts, out.LastError = ti.Attempts, ti.LastError
	switch ti.State {
	case engine.StateDead:
		out.DeadLettered = true
	case engine.StatePending:
		out.Retried, out.RetryAt = true, ti.AvailableAt
		if ti.Partition.IsOrdered() {
			if b, err := c.HGet(ctx, eng.Keys().Meta(ti.Partition), "b").Result(); err == nil {
				if ms, err := strconv.ParseInt(b, 10, 64); err == nil && time.UnixMilli(ms).After(out.RetryAt) {
					out.RetryAt = time.UnixMilli(ms)
				}
			}
		}
	default:
		tb.Fatalf("srqtest: task left %s after the run", ti.State)
	}
	return out
}
