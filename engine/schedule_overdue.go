package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Overdue says whether, at ReadAt, the schedule was active and its next tick more than its Grace
// in the past: no process fired it while the tick was on time, so it will be counted missed
// whenever one does. A running worker of the schedule's queue fires a due tick within about its
// PollWait (1s by default), and Grace is at least a second (a minute by default), so an overdue
// schedule is one that no worker fires: every process that would has stopped, or cannot reach
// Redis, or cannot load the schedule's time zone. A paused schedule, one without a next tick and a
// ScheduleInfo without ReadAt are never overdue.
func (s ScheduleInfo) Overdue() bool {
	return !s.Paused && !s.Next.IsZero() && !s.ReadAt.IsZero() && s.ReadAt.Sub(s.Next) > s.Grace
}

// MaxOverdueLook is the most schedules OverdueSchedules looks at in one call.
const MaxOverdueLook = 1000

// OverdueSchedules counts the schedules of e that are overdue (ScheduleInfo.Overdue) and returns
// their names, earliest due first. It reads the due index (crondue) for the schedules due more
// than MinScheduleGrace ago, the only ones that can be overdue, and the records of at most
// MaxOverdueLook of them: the server's clock, the index and, only when some schedule is a
// candidate, the records: two or three round trips, O(log n + candidates). more says there were more candidates than it looked at, so the
// count is a lower bound. It fails with the context's or Redis's error.
func (e *Engine) OverdueSchedules(ctx context.Context) (names []string, more bool, err error) {
	clock, err := e.client.Time(ctx).Result()
	if err != nil {
		return nil, false, fmt.Errorf("srq: overdue schedules: %w", err)
	}
	now := clock.Truncate(time.Millisecond)
	top := "(" + strconv.FormatInt(now.Add(-MinScheduleGrace).UnixMilli(), 10)
	cands, err := e.client.ZRangeByScore(ctx, e.keys.SchedulesDue(), &redis.ZRangeBy{Min: "-inf", Max: top,
		Count: MaxOverdueLook + 1}).Result()
	if err != nil {
		return nil, false, fmt.Errorf("srq: overdue schedules: %w", err)
	}
	if len(cands) > MaxOverdueLook {
		cands, more = cands[:MaxOverdueLook], true
	}
	if len(cands) == 0 {
		return nil, false, nil
	}
	pipe := e.client.Pipeline()
	recs := make([]*redis.MapStringStringCmd, len(cands))
	for i, name := range cands {
		recs[i] = pipe.HGetAll(ctx, e.keys.Schedule(name))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("srq: overdue schedules: %w", err)
	}
	for i, name := range cands {
		r, err := parseRecord(recs[i].Val())
		if err != nil {
			return nil, false, err
		}
		if r == nil {
			continue // deleted since the index was read
		}
		in := r.info(name)
		in.ReadAt = now
		if in.Overdue() {
			names = append(names, name)
		}
	}
	return names, more, nil
}
