package srq

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// The adaptive prefetch starts at Concurrency and grows to 8 × Concurrency (at least 64), within
// engine.MaxFetch − Concurrency; a set Prefetch is fixed, a negative one 0 (WorkerConfig.Prefetch).
func TestPrefetchRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg    WorkerConfig
		lo, hi int
	}{
		{WorkerConfig{Concurrency: 4}, 4, 64},
		{WorkerConfig{Concurrency: 100}, 100, 800},
		{WorkerConfig{Concurrency: 2000}, 2000, engine.MaxFetch - 2000},
		{WorkerConfig{Concurrency: engine.MaxFetch / 2}, engine.MaxFetch / 2, engine.MaxFetch / 2},
		{WorkerConfig{Concurrency: 10, Prefetch: 7}, 7, 7},
		{WorkerConfig{Concurrency: 10, Prefetch: -1}, 0, 0},
	} {
		if lo, hi := tt.cfg.prefetchRange(); lo != tt.lo || hi != tt.hi {
			t.Errorf("Concurrency %d, Prefetch %d: %d to %d, want %d to %d", tt.cfg.Concurrency, tt.cfg.Prefetch, lo, hi, tt.lo, tt.hi)
		}
	}
}

// RunOnce fetches at most Concurrency+Prefetch tasks; the adaptive default counts as Concurrency
// (Worker.RunOnce's doc), a fixed Prefetch as itself.
func TestRunOnceBound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := NewQueue[int](redistest.Client(t), QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]Message[int], 50)
	for i := range msgs {
		msgs[i] = Message[int]{Value: i, Opts: PublishOpts{Partition: strconv.Itoa(i)}}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	h := HandlerFunc[int](func(context.Context, *Task[int]) error { return nil })
	for _, tc := range []struct {
		prefetch, want int
	}{{0, 8}, {3, 7}, {-1, 4}} {
		w, err := NewWorker(q, h, WorkerConfig{Concurrency: 4, Prefetch: tc.prefetch, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.RunOnce(ctx); err != nil || n != tc.want {
			t.Errorf("Concurrency 4, Prefetch %d: RunOnce ran %d, %v; want %d", tc.prefetch, n, err, tc.want)
		}
	}
}
