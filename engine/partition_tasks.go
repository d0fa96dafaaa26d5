package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// seqDigits is the width of the sequence number that starts a pending set's member.
const seqDigits = 20

// PendingTask is a pending task of one partition, as PartitionTasks lists it.
type PendingTask struct {
	ID          string
	Priority    int
	Sequence    string    // the publish sequence number that orders it among equal times
	AvailableAt time.Time // server clock
	EnqueuedAt  time.Time
	Attempts    int // deliveries so far
	MaxAttempts int // 0: unlimited
	LastError   string
	// Debounce is the key and mode of a task a debounced publish added; nil for others.
	Debounce *DebounceInfo
}

// PartitionTaskPage is one page of a partition's pending tasks.
type PartitionTaskPage struct {
	Tasks []PendingTask
	// Due counts the partition's pending tasks available now, Delayed those available later.
	Due, Delayed int64
	// Now is the Redis server's clock that split them.
	Now time.Time
}

// PartitionTasks lists the pending tasks of partition p, read from its pending sets (one per
// priority level) in three pipelined round trips. With delayed false it lists the tasks available
// now, in the order a fetch takes them (priority high to low, then available-at, then publish
// order); with delayed true the tasks available later, soonest first (then priority high to low).
// It skips offset of them and returns at most limit. Whether a task is available is read from its
// available-at alone: a paused partition, an ordered one held by a lease or blocked by a delayed
// reject lists its due tasks as due. It costs O(levels · (log n + offset + limit)); a task acked or
// fetched between the round trips is left out. It fails with ErrInvalid for an invalid key, a
// negative offset, a limit outside [1, MaxInspectPage] or offset+limit above MaxInspectPage, and
// with the context's or Redis's error.
func (e *Engine) PartitionTasks(ctx context.Context, p partition.Key, delayed bool, offset, limit int) (PartitionTaskPage, error) {
	if err := p.Validate(); err != nil {
		return PartitionTaskPage{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if offset < 0 || limit < 1 || limit > MaxInspectPage || offset > MaxInspectPage-limit {
		return PartitionTaskPage{}, invalidf("partition task page offset %d limit %d (offset+limit at most %d)", offset, limit, MaxInspectPage)
	}
	// 1: the server clock and the partition's non-zero levels (level 0 is never recorded).
	pipe := e.client.Pipeline()
	timeCmd := pipe.Time(ctx)
	levelsCmd := pipe.ZRange(ctx, e.keys.Levels(p), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return PartitionTaskPage{}, fmt.Errorf("srq: partition tasks: %w", err)
	}
	now := timeCmd.Val().Truncate(time.Millisecond)
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	levels := []int{0}
	for _, s := range levelsCmd.Val() {
		l, err := strconv.Atoi(s)
		if err != nil {
			return PartitionTaskPage{}, fmt.Errorf("srq: partition tasks: bad level %q", s)
		}
		if l != 0 {
			levels = append(levels, l)
		}
	}
	slices.Sort(levels)
	slices.Reverse(levels)

	// 2: per level, the counts and the first offset+limit of the list asked for.
	type level struct {
		due, later *redis.IntCmd
		page       *redis.ZSliceCmd
	}
	per := make([]level, len(levels))
	pipe = e.client.Pipeline()
	for i, l := range levels {
		key := e.keys.Pending(p, l)
		per[i].due = pipe.ZCount(ctx, key, "-inf", nowMS)
		per[i].later = pipe.ZCount(ctx, key, "("+nowMS, "+inf")
		rng := &redis.ZRangeBy{Min: "-inf", Max: nowMS, Count: int64(offset + limit)}
		if delayed {
			rng.Min, rng.Max = "("+nowMS, "+inf"
		}
		per[i].page = pipe.ZRangeByScoreWithScores(ctx, key, rng)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return PartitionTaskPage{}, fmt.Errorf("srq: partition tasks: %w", err)
	}
	out := PartitionTaskPage{Now: now}
	var all []PendingTask
	for i, l := range per {
		out.Due += l.due.Val()
		out.Delayed += l.later.Val()
		for _, z := range l.page.Val() {
			m, _ := z.Member.(string)
			if len(m) <= seqDigits {
				return PartitionTaskPage{}, fmt.Errorf("srq: partition tasks: malformed member %q", m)
			}
			all = append(all, PendingTask{ID: m[seqDigits:], Sequence: m[:seqDigits], Priority: levels[i],
				AvailableAt: time.UnixMilli(int64(z.Score))})
		}
	}
	if delayed {
		slices.SortStableFunc(all, func(a, b PendingTask) int {
			return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), cmp.Compare(b.Priority, a.Priority),
				strings.Compare(a.Sequence, b.Sequence))
		})
	}
	all = all[min(offset, len(all)):min(offset+limit, len(all))]

	// 3: the records' counters.
	pipe = e.client.Pipeline()
	recs := make([]*redis.SliceCmd, len(all))
	for i, t := range all {
		recs[i] = pipe.HMGet(ctx, e.keys.Task(t.ID), "c", "a", "m", "x", "b")
	}
	if len(all) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return PartitionTaskPage{}, fmt.Errorf("srq: partition tasks: %w", err)
		}
	}
	out.Tasks = make([]PendingTask, 0, len(all))
	for i, t := range all {
		v := recs[i].Val()
		if v[0] == nil { // gone since the range was read
			continue
		}
		num := func(x any) int64 {
			s, _ := x.(string)
			n, _ := strconv.ParseInt(s, 10, 64)
			return n
		}
		t.EnqueuedAt, t.Attempts, t.MaxAttempts = msTime(num(v[0])), int(num(v[1])), int(num(v[2]))
		t.LastError, _ = v[3].(string)
		b, _ := v[4].(string)
		t.Debounce = parseDebounceField(b)
		out.Tasks = append(out.Tasks, t)
	}
	return out, nil
}
