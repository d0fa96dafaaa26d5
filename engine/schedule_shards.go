package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The schedules of a queue split into shards: each lives in the shard its ticks publish to, so a
// call by name asks every shard.

// FindSchedule returns schedule name from whichever of engs (the shards of one queue) holds it,
// with ScheduleInfo.Shard set: one call per shard, until found. It fails with ErrScheduleNotFound
// when none does, and with the context's or Redis's error.
func FindSchedule(ctx context.Context, engs []*Engine, name string) (ScheduleInfo, error) {
	for _, e := range engs {
		in, err := e.GetSchedule(ctx, name)
		if !errors.Is(err, ErrScheduleNotFound) {
			return in, err
		}
	}
	queue := ""
	if len(engs) > 0 {
		queue = engs[0].cfg.Queue
	}
	return ScheduleInfo{}, fmt.Errorf("%w: %q in %s", ErrScheduleNotFound, name, queue)
}

// ListSchedulesIn returns up to limit (1 to MaxSchedulePage) schedules of engs (the shards of one
// queue) in name order, those after the name after: one call per shard. It fails with ErrInvalid
// for a bad limit, and with the context's or Redis's error.
func ListSchedulesIn(ctx context.Context, engs []*Engine, after string, limit int) ([]ScheduleInfo, error) {
	var all []ScheduleInfo
	for _, e := range engs {
		page, err := e.ListSchedules(ctx, after, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
	}
	slices.SortStableFunc(all, func(a, b ScheduleInfo) int { return strings.Compare(a.Name, b.Name) })
	// A schedule being moved between shards (PutScheduleIn) may show in two for a moment.
	all = slices.CompactFunc(all, func(a, b ScheduleInfo) bool { return a.Name == b.Name })
	return all[:min(len(all), limit)], nil
}

// PutScheduleIn puts def into home, one of engs (the shards of one queue), as PutSchedule does,
// after deleting a schedule of that name from the other shards (its task's partition, which picks
// the shard, changed): the ticks that schedule published are not published again. It fails as
// PutSchedule does; when it fails after the deletion, the schedule may be gone: put it again.
func PutScheduleIn(ctx context.Context, engs []*Engine, home *Engine, def *ScheduleDef) (ScheduleInfo, error) {
	if err := home.ValidateSchedule(def); err != nil {
		return ScheduleInfo{}, err
	}
	var last int64
	for _, e := range engs {
		if e == home {
			continue
		}
		l, err := e.takeSchedule(ctx, def.Name)
		if err != nil {
			return ScheduleInfo{}, err
		}
		last = max(last, l)
	}
	return home.putSchedule(ctx, def, last)
}

// takeSchedule deletes schedule name of e, if it exists, and returns the latest tick it may
// have published: its last tick, or a pending flow tick.
func (e *Engine) takeSchedule(ctx context.Context, name string) (int64, error) {
	var last int64
	_, err := e.scheduleTx(ctx, name, 10, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
		if r == nil {
			return nil, errNoWrite
		}
		last = r.last
		for _, t := range r.pending {
			last = max(last, t)
		}
		return func(p redis.Pipeliner) { e.deleteSchedule(ctx, p, name) }, nil
	})
	if err != nil {
		return 0, fmt.Errorf("srq: move schedule %q from %s: %w", name, e.cfg.Queue, err)
	}
	return last, nil
}

// DeleteScheduleIn deletes schedule name from every one of engs (the shards of one queue) and
// reports whether any held it. It fails with the context's or Redis's error.
func DeleteScheduleIn(ctx context.Context, engs []*Engine, name string) (bool, error) {
	found := false
	for _, e := range engs {
		ok, err := e.DeleteSchedule(ctx, name)
		if err != nil {
			return found, err
		}
		found = found || ok
	}
	return found, nil
}
