package middleware_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// TestRateLimitPerPartition: partition "slow" allows one task per 400ms; its three tasks run
// spaced out, each on its first attempt, while partition "fast" is not held back by it.
func TestRateLimitPerPartition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := redistest.Client(t)
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []srq.Message[int]
	for i := 0; i < 3; i++ {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: "slow", Ordered: true}})
	}
	msgs = append(msgs, srq.Message[int]{Value: 9, Opts: srq.PublishOpts{Partition: "fast", Ordered: true}})
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	type run struct {
		part    string
		value   int
		attempt int
		at      time.Time
	}
	var mu sync.Mutex
	var runs []run
	all := make(chan struct{})
	h := srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, run{task.Partition.Name(), task.Value, task.Attempt, time.Now()})
		if len(runs) == 4 {
			close(all)
		}
		return nil
	})
	limit, err := middleware.RateLimit(q, middleware.RateLimitConfig{PerPartition: middleware.Rate{Limit: 1, Per: 400 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 4, Logger: quiet, Middleware: []srq.Middleware{limit}})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(ctx, w)
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("tasks did not all run")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var slow []run
	var fast run
	for _, r := range runs {
		if r.attempt != 1 {
			t.Errorf("%s/%d ran on attempt %d: rate limiting used attempts", r.part, r.value, r.attempt)
		}
		if r.part == "slow" {
			slow = append(slow, r)
		} else {
			fast = r
		}
	}
	for i, r := range slow {
		if r.value != i {
			t.Fatalf("slow ran out of order: %+v", slow)
		}
		if i > 0 && r.at.Sub(slow[i-1].at) < 300*time.Millisecond {
			t.Errorf("slow/%d ran %v after the one before, inside the 400ms limit", i, r.at.Sub(slow[i-1].at))
		}
	}
	if fast.at.After(slow[1].at) {
		t.Errorf("fast waited for slow's limit: ran at %v, slow/1 at %v", fast.at, slow[1].at)
	}
	st, _ := q.Engine().Stats(ctx)
	if st.Acked != 4 || st.Dead != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRateLimitConfigErrors(t *testing.T) {
	t.Parallel()
	q, err := srq.NewQueue[int](redistest.Client(t), srq.QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []middleware.RateLimitConfig{
		{PerPartition: middleware.Rate{Limit: 1}},
		{PerQueue: middleware.Rate{Limit: -1, Per: time.Second}},
		{PerQueue: middleware.Rate{Limit: 1, Per: time.Second, Burst: -2}},
	} {
		if _, err := middleware.RateLimit(q, cfg); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// noEngine is a source that has no engine to give.
type noEngine struct{}

func (noEngine) Engine() *engine.Engine { return nil }

// TestRateLimitNilSource: RateLimit fails with srq.ErrInvalid, rather than panicking, for a nil
// source, a typed nil queue, and a source without an engine.
func TestRateLimitNilSource(t *testing.T) {
	t.Parallel()
	cfg := middleware.RateLimitConfig{PerQueue: middleware.Rate{Limit: 1, Per: time.Second}}
	for name, q := range map[string]middleware.EngineSource{
		"nil":                nil,
		"(*srq.Queue)(nil)":  (*srq.Queue[int])(nil),
		"Engine returns nil": noEngine{},
	} {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s: panic %v", name, v)
				}
			}()
			if mw, err := middleware.RateLimit(q, cfg); !errors.Is(err, srq.ErrInvalid) || mw != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
}
