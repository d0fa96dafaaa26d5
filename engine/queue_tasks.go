package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// The queue-wide lists of pending tasks and of kept outcomes are read from the indexes the scripts
// keep for every call already (heads, the partitions' pending sets, outs), with plain commands in a
// few pipelined round trips: they add no write to a publish, a fetch or an ack, and a page costs
// O(page · (levels + log n)) whatever the queue holds.

// PendingCursor is where a walk of PendingTasks goes on: the rank, in the heads index, of the
// partition it is in (partitions in order of their earliest available-at), and how many of that
// partition's pending tasks it listed already. The zero cursor starts the pending list at its
// first partition; a delayed list's first page is asked with First.
type PendingCursor struct {
	Rank, Skip int64
	// First starts the list at its first partition, whatever Rank and Skip say.
	First bool
}

// ListedTask is a pending task as PendingTasks lists it, with the cursor that continues after it.
type ListedTask struct {
	PendingTask
	Partition partition.Key
	// PartitionHead is the partition's earliest available-at (its heads score), which orders the
	// partitions of the list.
	PartitionHead time.Time
	// After is the cursor that lists the tasks after this one.
	After PendingCursor
}

// PendingTaskPage is one page of PendingTasks.
type PendingTaskPage struct {
	Tasks []ListedTask
	// Next continues the list; Done says there is nothing after this page.
	Next PendingCursor
	Done bool
	// Partitions counts the partitions of the list: those with a task available now (due), or
	// those whose every task is delayed.
	Partitions int64
	// Now is the server clock that split due from delayed.
	Now time.Time
}

// PendingTasks lists a page of the queue's pending tasks, partition by partition. With delayed
// false, the partitions that have a task available now, longest waiting first (by the
// available-at of their earliest pending task, the heads index); with delayed true, those whose
// every pending task is delayed, soonest first. Within a partition its pending tasks come by
// priority, highest first, then by available-at, then in publish order: for the tasks available
// now that is the order a fetch takes them; a partition listed as due also lists its delayed tasks
// after its due ones of the same priority. So every pending task is in one of the two lists, once,
// while nothing changes. A page lists at most limit tasks from at most limit partitions, from
// cursor from, and costs O(limit · (L + log n)) in at most seven pipelined round trips, L being the
// priority levels of the partitions read; a task fetched between the round trips is left out,
// and a list that changes under a walk may repeat or skip a task at a page's edge. It fails with
// ErrInvalid for a limit outside [1, MaxInspectPage] or a negative cursor, and with the context's
// or Redis's error.
func (e *Engine) PendingTasks(ctx context.Context, delayed bool, from PendingCursor, limit int) (PendingTaskPage, error) {
	if limit < 1 || limit > MaxInspectPage {
		return PendingTaskPage{}, invalidf("pending task page limit %d is outside [1, %d]", limit, MaxInspectPage)
	}
	if from.Rank < 0 || from.Skip < 0 {
		return PendingTaskPage{}, invalidf("malformed pending task cursor %d.%d", from.Rank, from.Skip)
	}
	fail := func(err error) (PendingTaskPage, error) {
		return PendingTaskPage{}, fmt.Errorf("srq: pending tasks: %w", err)
	}
	now, err := e.client.Time(ctx).Result()
	if err != nil {
		return fail(err)
	}
	now = now.Truncate(time.Millisecond)
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)

	// 2: how many partitions are due, and the partitions of the page by rank in heads.
	pipe := e.client.Pipeline()
	dueCmd := pipe.ZCount(ctx, e.keys.Heads(), "-inf", nowMS)
	allCmd := pipe.ZCard(ctx, e.keys.Heads())
	var heads *redis.ZSliceCmd
	if !from.First || !delayed {
		if from.First {
			from = PendingCursor{}
		}
		heads = pipe.ZRangeWithScores(ctx, e.keys.Heads(), from.Rank, from.Rank+int64(limit)-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err)
	}
	due, all := dueCmd.Val(), allCmd.Val()
	page := PendingTaskPage{Now: now, Partitions: due}
	if delayed {
		page.Partitions = all - due
	}
	if heads == nil { // the delayed list's first page starts after the due partitions
		from = PendingCursor{Rank: due}
		heads = e.client.ZRangeWithScores(ctx, e.keys.Heads(), from.Rank, from.Rank+int64(limit)-1)
		if err := heads.Err(); err != nil {
			return fail(err)
		}
	}
	type part struct {
		key   partition.Key
		rank  int64
		head  time.Time
		skip  int64
		depth *redis.FloatCmd
		lvs   *redis.StringSliceCmd
		// levels, highest first, with the number of tasks at each
		levels []int
		counts []*redis.IntCmd
	}
	var parts []*part
	for i, z := range heads.Val() {
		key, _ := z.Member.(string)
		isDue := z.Score <= float64(now.UnixMilli())
		if isDue == delayed {
			if !delayed {
				break // past the due partitions
			}
			continue // a partition that became due since the count
		}
		p := &part{key: partition.Key(key), rank: from.Rank + int64(i), head: time.UnixMilli(int64(z.Score))}
		if len(parts) == 0 && p.rank == from.Rank {
			p.skip = from.Skip
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		page.Done, page.Next = true, from
		return page, nil
	}

	// 3: each partition's count and its non-zero priority levels.
	pipe = e.client.Pipeline()
	for _, p := range parts {
		p.depth = pipe.ZScore(ctx, e.keys.Depth(), string(p.key))
		p.lvs = pipe.ZRange(ctx, e.keys.Levels(p.key), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fail(err)
	}
	// 4: the count of each level of a partition with more than one.
	pipe = e.client.Pipeline()
	multi := false
	for _, p := range parts {
		p.levels = []int{0}
		for _, s := range p.lvs.Val() {
			l, err := strconv.Atoi(s)
			if err != nil {
				return fail(fmt.Errorf("partition %q: bad level %q", string(p.key), s))
			}
			if l != 0 {
				p.levels = append(p.levels, l)
			}
		}
		slices.Sort(p.levels)
		slices.Reverse(p.levels)
		if len(p.levels) > 1 {
			multi = true
			for _, l := range p.levels {
				p.counts = append(p.counts, pipe.ZCard(ctx, e.keys.Pending(p.key, l)))
			}
		}
	}
	if multi {
		if _, err := pipe.Exec(ctx); err != nil {
			return fail(err)
		}
	}

	// 5: the slices of the pending sets the page takes, partition by partition.
	type slice struct {
		p     *part
		level int
		first int64 // index in the partition of the slice's first task
		rng   *redis.ZSliceCmd
	}
	var slices_ []slice
	pipe = e.client.Pipeline()
	left := int64(limit)
	last := parts[len(parts)-1]
	for _, p := range parts {
		if left == 0 {
			break
		}
		depth := int64(p.depth.Val())
		if p.depth.Err() != nil || depth <= p.skip {
			last = p // emptied since, or listed: the walk goes on after it
			continue
		}
		take := min(depth-p.skip, left)
		left -= take
		last = p
		// Map [skip, skip+take) of the partition's order onto its levels.
		at := int64(0)
		for i, l := range p.levels {
			n := depth // one level: all of them
			if p.counts != nil {
				n = p.counts[i].Val()
			}
			lo, hi := max(p.skip, at), min(p.skip+take, at+n)
			if lo < hi {
				slices_ = append(slices_, slice{p: p, level: l, first: lo,
					rng: pipe.ZRangeWithScores(ctx, e.keys.Pending(p.key, l), lo-at, hi-at-1)})
			}
			at += n
		}
	}
	if len(slices_) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return fail(err)
		}
	}
	for _, s := range slices_ {
		for j, z := range s.rng.Val() {
			m, _ := z.Member.(string)
			if len(m) <= seqDigits {
				return fail(fmt.Errorf("malformed member %q", m))
			}
			idx := s.first + int64(j)
			page.Tasks = append(page.Tasks, ListedTask{
				PendingTask: PendingTask{ID: m[seqDigits:], Sequence: m[:seqDigits], Priority: s.level,
					AvailableAt: time.UnixMilli(int64(z.Score))},
				Partition: s.p.key, PartitionHead: s.p.head, After: PendingCursor{Rank: s.p.rank, Skip: idx + 1}})
		}
	}
	// The cursor: after the last task listed, or after the last partition looked at.
	page.Next = PendingCursor{Rank: last.rank + 1}
	if n := len(page.Tasks); n > 0 && page.Tasks[n-1].Partition == last.key {
		if t := page.Tasks[n-1]; t.After.Skip < int64(last.depth.Val()) {
			page.Next = t.After
		}
	}
	end := due
	if delayed {
		end = all
	}
	page.Done = page.Next.Rank >= end && page.Next.Skip == 0

	// 6: the records' counters.
	if err := e.fillPending(ctx, page.Tasks); err != nil {
		return fail(err)
	}
	page.Tasks = slices.DeleteFunc(page.Tasks, func(t ListedTask) bool { return t.EnqueuedAt.IsZero() })
	return page, nil
}

// fillPending reads the enqueued-at, attempts, max attempts, last error and debounce key of ts from their
// records, one pipelined round trip; a task whose record is gone keeps a zero EnqueuedAt.
func (e *Engine) fillPending(ctx context.Context, ts []ListedTask) error {
	if len(ts) == 0 {
		return nil
	}
	pipe := e.client.Pipeline()
	recs := make([]*redis.SliceCmd, len(ts))
	for i, t := range ts {
		recs[i] = pipe.HMGet(ctx, e.keys.Task(t.ID), "c", "a", "m", "x", "b")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	num := func(x any) int64 {
		s, _ := x.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	for i := range ts {
		v := recs[i].Val()
		if v[0] == nil {
			continue
		}
		t := &ts[i]
		t.EnqueuedAt, t.Attempts, t.MaxAttempts = msTime(num(v[0])), int(num(v[1])), int(num(v[2]))
		t.LastError, _ = v[3].(string)
		b, _ := v[4].(string)
		t.Debounce = parseDebounceField(b)
	}
	return nil
}

// KeptOutcome is the kept outcome of a task that ended, as Outcomes lists it.
type KeptOutcome struct {
	ID string
	// State is StateSucceeded, StateDead or StateCancelled.
	State State
	// Ended is when the task ended; KeptUntil when its outcome is forgotten (zero: kept for good).
	Ended, KeptUntil time.Time
	// ResultLen is the size of a succeeded task's result; Error why a task died or was cancelled.
	ResultLen int64
	Error     string
}

// OutcomeCursor is where Outcomes goes on: the task listed last and its score in the outs index.
// The zero cursor starts at the newest.
type OutcomeCursor struct {
	ID    string
	Score float64
}

// OutcomePage is one page of Outcomes.
type OutcomePage struct {
	Outcomes []KeptOutcome
	// Next continues the list; empty ID when there is no more.
	Next OutcomeCursor
	// Total counts the kept outcomes.
	Total int64
}

// Outcomes lists a page of the kept outcomes of the queue's tasks (those published with a result
// retention or to be waited for), latest retention end first, which is most recently ended first
// among tasks kept equally long. From cursor from; the cursor goes on from its task's place while
// that outcome is kept, else from its score. It costs O(log n + limit) in three pipelined round
// trips. It fails with ErrInvalid for a limit outside [1, MaxInspectPage], and with the context's
// or Redis's error.
func (e *Engine) Outcomes(ctx context.Context, from OutcomeCursor, limit int) (OutcomePage, error) {
	if limit < 1 || limit > MaxInspectPage {
		return OutcomePage{}, invalidf("outcome page limit %d is outside [1, %d]", limit, MaxInspectPage)
	}
	fail := func(err error) (OutcomePage, error) { return OutcomePage{}, fmt.Errorf("srq: outcomes: %w", err) }
	outs := e.keys.Outcomes()
	pipe := e.client.Pipeline()
	total := pipe.ZCard(ctx, outs)
	var rank *redis.IntCmd
	if from.ID != "" {
		rank = pipe.ZRevRank(ctx, outs, from.ID)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fail(err)
	}
	var zs []redis.Z
	var err error
	switch {
	case from.ID == "":
		zs, err = e.client.ZRevRangeWithScores(ctx, outs, 0, int64(limit)-1).Result()
	case rank.Err() == nil:
		r := rank.Val()
		zs, err = e.client.ZRevRangeWithScores(ctx, outs, r+1, r+int64(limit)).Result()
	default: // forgotten since: below its score
		zs, err = e.client.ZRevRangeByScoreWithScores(ctx, outs, &redis.ZRangeBy{Max: "(" + scoreString(from.Score),
			Min: "-inf", Count: int64(limit)}).Result()
	}
	if err != nil {
		return fail(err)
	}
	page := OutcomePage{Total: total.Val()}
	if len(zs) == 0 {
		return page, nil
	}
	pipe = e.client.Pipeline()
	fields := make([]*redis.SliceCmd, len(zs))
	sizes := make([]*redis.IntCmd, len(zs))
	for i, z := range zs {
		id, _ := z.Member.(string)
		fields[i] = pipe.HMGet(ctx, e.keys.Outcome(id), "s", "f", "e")
		sizes[i] = pipe.HStrLen(ctx, e.keys.Outcome(id), "v")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err)
	}
	for i, z := range zs {
		id, _ := z.Member.(string)
		v := fields[i].Val()
		s, _ := v[0].(string)
		if s == "" {
			continue // forgotten between the round trips
		}
		ms, _ := v[1].(string)
		ended, _ := strconv.ParseInt(ms, 10, 64)
		o := KeptOutcome{ID: id, State: outcomeStates[s], Ended: msTime(ended), ResultLen: sizes[i].Val()}
		o.Error, _ = v[2].(string)
		if !math.IsInf(z.Score, 1) {
			o.KeptUntil = time.UnixMilli(int64(z.Score))
		}
		page.Outcomes = append(page.Outcomes, o)
	}
	if len(zs) == limit {
		l := zs[len(zs)-1]
		id, _ := l.Member.(string)
		page.Next = OutcomeCursor{ID: id, Score: l.Score}
	}
	return page, nil
}

// scoreString formats a sorted-set score as Redis reads it back.
func scoreString(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
