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
// the shard, changed). The moved schedule keeps its state, as an update does: paused or not, its
// last tick and when it was published, its counts of ticks fired and missed, and when it was
// created; the ticks it published are not published again, and it goes on at its first tick after
// both now and its last tick. It fails as PutSchedule does; when it fails after the deletion, the
// schedule may be gone: put it again.
func PutScheduleIn(ctx context.Context, engs []*Engine, home *Engine, def *ScheduleDef) (ScheduleInfo, error) {
	if err := home.ValidateSchedule(def); err != nil {
		return ScheduleInfo{}, err
	}
	var moved *schedRecord
	for _, e := range engs {
		if e == home {
			continue
		}
		r, err := e.takeSchedule(ctx, def.Name)
		if err != nil {
			return ScheduleInfo{}, err
		}
		moved = mergeMoved(moved, r)
	}
	return home.putSchedule(ctx, def, moved)
}

// takeSchedule deletes schedule name of e, if it exists, and returns its record (nil when there
// was none) with last raised to the latest tick it may have published: its last tick, or a
// pending flow tick. The pending ticks are not carried over: the process that claimed them
// publishes them, and the moved schedule, starting after them, never does.
func (e *Engine) takeSchedule(ctx context.Context, name string) (*schedRecord, error) {
	var took *schedRecord
	_, err := e.scheduleTx(ctx, name, 10, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
		took = nil
		if r == nil {
			return nil, errNoWrite
		}
		for _, t := range r.pending {
			r.last = max(r.last, t)
		}
		r.pending, r.claim = nil, 0
		took = r
		return func(p redis.Pipeliner) { e.deleteSchedule(ctx, p, name) }, nil
	})
	if err != nil {
		return nil, fmt.Errorf("srq: move schedule %q from %s: %w", name, e.cfg.Queue, err)
	}
	return took, nil
}

// mergeMoved returns the state of a schedule held by both a and b (either may be nil): two
// shards hold one name only after a move that failed half way, or puts that raced. The latest
// ticks and counts of both are kept, and the pause of the one updated last.
func mergeMoved(a, b *schedRecord) *schedRecord {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := *a
	if b.updated > a.updated {
		out.paused = b.paused
	}
	out.last, out.fired = max(a.last, b.last), max(a.fired, b.fired)
	out.nFired, out.nMissed = a.nFired+b.nFired, a.nMissed+b.nMissed
	if b.created != 0 && (out.created == 0 || b.created < out.created) {
		out.created = b.created
	}
	return &out
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
