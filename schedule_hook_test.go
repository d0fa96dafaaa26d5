package srq

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/pool"
	"github.com/srqueue/srq/internal/redistest"
)

// TestRunSchedulesFiresTheQueue: the loop a Worker runs beside its fetchers (pool.FireLoop over
// pool.FireShards) fires its queue's
// schedules, on every shard, and returns nil when its context ends.
func TestRunSchedulesFiresTheQueue(t *testing.T) {
	t.Parallel()
	q, err := NewQueue[int](redistest.Client(t), QueueConfig{Name: redistest.Queue(t), Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var parts []string
	for _, p := range []string{"a", "b", "c", "d"} {
		if _, err := q.Schedule(ctx, p, 1, &ScheduleOpts{Every: time.Second, Publish: PublishOpts{Partition: p}}); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		done <- pool.FireLoop(runCtx, time.Second, log, func(ctx context.Context) (time.Duration, []engine.FiredTick, error) {
			return pool.FireShards(ctx, q.name, q.shards.engines, log)
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range parts {
		for {
			in, err := q.GetSchedule(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if in.Fired > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("schedule %s never fired", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("FireLoop: %v", err)
	}
}
