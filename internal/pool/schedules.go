package pool

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/srqueue/srq/engine"
)

// fireBatch is how many schedules one FireSchedules call fires.
const fireBatch = 100

// FireShards fires the due ticks of queue's shards and returns how long until the next known tick
// (an hour when none is known).
func FireShards(ctx context.Context, queue string, engs []*engine.Engine, log *slog.Logger) (time.Duration, []engine.FiredTick, error) {
	wait := time.Hour
	var fired []engine.FiredTick
	var errs []error
	for _, e := range engs {
		for {
			res, err := e.FireSchedules(ctx, fireBatch)
			reportTicks(log, queue, res)
			fired = append(fired, res.Fired...)
			if err != nil {
				errs = append(errs, err)
			}
			if res.Wait >= 0 {
				wait = min(wait, res.Wait)
			}
			if !res.More || ctx.Err() != nil {
				break
			}
		}
	}
	return wait, fired, errors.Join(errs...)
}

// reportTicks reports what one firing did: each tick published, each schedule's missed ticks.
// This is where a fired tick is reported; a per-queue event stream hooks in here.
func reportTicks(log *slog.Logger, queue string, res engine.FireResult) {
	for _, f := range res.Fired {
		log.Debug("srq: schedule fired", "queue", queue, "schedule", f.Schedule, "tick", f.Tick, "id", f.ID, "flow", f.Flow)
	}
	for _, m := range res.Missed {
		log.Warn("srq: schedule missed ticks", "queue", queue, "schedule", m.Schedule, "missed", m.Count)
	}
}

// FireLoop runs pass until ctx ends, sleeping between passes for as long as the pass says, at most
// poll; after an error, which it logs to log, poll.
func FireLoop(ctx context.Context, poll time.Duration, log *slog.Logger,
	pass func(context.Context) (time.Duration, []engine.FiredTick, error)) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		wait, _, err := pass(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error("srq: fire schedules", "err", err)
			wait = poll
		}
		// A millisecond past the due time, so the server's clock has reached it too.
		t.Reset(min(wait, poll) + time.Millisecond)
	}
}

// runSchedules fires the schedules of one source's queue until ctx ends: what a worker runs beside
// its fetchers, so every worker process fires its queues' schedules with no Scheduler to run.
// Errors are logged and never end it: it returns nil when ctx ends.
func runSchedules(ctx context.Context, s *source, poll time.Duration) error {
	return FireLoop(ctx, poll, s.log, func(ctx context.Context) (time.Duration, []engine.FiredTick, error) {
		return FireShards(ctx, s.Name, s.Engines, s.log)
	})
}
