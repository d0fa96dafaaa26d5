package inspect

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TaskQuery selects a page of a queue's pending tasks for PendingTasks.
type TaskQuery struct {
	// Delayed lists the partitions whose every pending task is delayed, soonest first; false lists
	// the partitions with a task available now, longest waiting first.
	Delayed bool
	// Cursor continues a listing where TaskPage.Next left it; empty starts at the first partition.
	// A cursor is opaque and belongs to the query and queue that returned it.
	Cursor string
	// Limit is the most tasks returned. Default 50; at most MaxLimit.
	Limit int
}

// ListedTask is a pending task, as PendingTasks lists it.
type ListedTask struct {
	PendingTask
	Shard     int           `json:"shard"`
	Partition partition.Key `json:"partition"`
	// PartitionHead is the available-at of its partition's earliest pending task, which orders
	// the partitions of the list.
	PartitionHead time.Time `json:"partition_head"`
}

// TaskPage is one page of PendingTasks.
type TaskPage struct {
	Tasks []ListedTask `json:"tasks"`
	// Next continues the listing (TaskQuery.Cursor); empty when the list ended.
	Next string `json:"next"`
	// Partitions counts the partitions of the list: those with a task available now, or those
	// whose every pending task is delayed.
	Partitions int64 `json:"partitions"`
	// ServerTime is the Redis server's clock that split due from delayed (the latest over the shards).
	ServerTime time.Time `json:"server_time"`
}

// PendingTasks returns one page of queue's pending tasks, partition by partition, read from the
// indexes the scripts keep (never a scan, and nothing written on a publish, a fetch or an ack for
// it): with q.Delayed false the partitions that have a task available now, longest waiting first
// (by the available-at of their earliest pending task); with q.Delayed true those whose every
// pending task is delayed, soonest first. A partition's tasks come by priority, highest first,
// then available-at, then publish order, its delayed ones included: every pending task is in one
// of the two lists, once, while nothing changes. A task with attempts above 0 was delivered and
// sent back: it is retrying. Shards are merged by partition. A page costs, per shard,
// O(limit · (levels + log n)) in a few pipelined round trips (engine.PendingTasks); a list that
// changes under a walk may repeat or skip a task at a page's edge. It fails with
// engine.ErrInvalid for a limit above MaxLimit or a malformed cursor, with engine.ErrNotFound for
// an unknown queue, and with Redis's error.
func (in *Inspector) PendingTasks(ctx context.Context, queue string, q TaskQuery) (TaskPage, error) {
	limit := cmp.Or(q.Limit, DefaultPageLimit)
	if limit < 1 || limit > MaxLimit {
		return TaskPage{}, fmt.Errorf("inspect: %w: task page limit %d is outside [1, %d]", engine.ErrInvalid, limit, MaxLimit)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return TaskPage{}, err
	}
	comps, err := parseTaskCursor(q.Cursor, len(engs))
	if err != nil {
		return TaskPage{}, err
	}
	pages := make([]engine.PendingTaskPage, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		at := comps[i].at
		if comps[i].done { // only its count of partitions: a cursor past every partition
			at = engine.PendingCursor{Rank: 1 << 40}
		}
		var err error
		pages[i], err = e.PendingTasks(ctx, q.Delayed, at, limit)
		return err
	})
	if err != nil {
		return TaskPage{}, fmt.Errorf("inspect: pending tasks of %q: %w", queue, err)
	}
	type row struct {
		engine.ListedTask
		shard int
	}
	var rows []row
	out := TaskPage{Tasks: []ListedTask{}}
	for i, pg := range pages {
		out.Partitions += pg.Partitions
		if pg.Now.After(out.ServerTime) {
			out.ServerTime = pg.Now
		}
		for _, t := range pg.Tasks {
			rows = append(rows, row{t, i})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(a.PartitionHead.Compare(b.PartitionHead), cmp.Compare(a.shard, b.shard))
	})
	rows = rows[:min(len(rows), limit)]
	taken := make([]int, len(engs))
	for _, r := range rows {
		taken[r.shard]++
		out.Tasks = append(out.Tasks, ListedTask{Shard: r.shard, Partition: r.Partition, PartitionHead: r.PartitionHead,
			PendingTask: PendingTask{ID: r.ID, Priority: r.Priority, AvailableAt: r.AvailableAt, EnqueuedAt: r.EnqueuedAt,
				Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LastError: r.LastError, Debounce: r.Debounce}})
	}
	// Each shard goes on after the last of its tasks this page shows; one whose tasks were all
	// shown, from where its own page ended.
	next := make([]taskCursor, len(engs))
	for i, pg := range pages {
		switch {
		case comps[i].done:
			next[i] = comps[i]
		case taken[i] == len(pg.Tasks):
			next[i] = taskCursor{at: pg.Next, done: pg.Done}
		case taken[i] == 0:
			next[i] = comps[i]
		default:
			next[i] = taskCursor{at: pg.Tasks[taken[i]-1].After}
		}
	}
	out.Next = formatTaskCursor(next)
	return out, nil
}

// taskCursor is one shard's place in a walk of PendingTasks.
type taskCursor struct {
	at   engine.PendingCursor
	done bool
}

// A task cursor is "<shards>:<component>,<component>…": per shard "" (not started), "x" (done)
// or "<rank>.<skip>".
func formatTaskCursor(cs []taskCursor) string {
	if !slices.ContainsFunc(cs, func(c taskCursor) bool { return !c.done }) {
		return ""
	}
	comps := make([]string, len(cs))
	for i, c := range cs {
		switch {
		case c.done:
			comps[i] = cursorDone
		case c.at.First:
			comps[i] = cursorStart
		default:
			comps[i] = strconv.FormatInt(c.at.Rank, 10) + "." + strconv.FormatInt(c.at.Skip, 10)
		}
	}
	return strconv.Itoa(len(cs)) + ":" + strings.Join(comps, ",")
}

func parseTaskCursor(c string, shards int) ([]taskCursor, error) {
	out := make([]taskCursor, shards)
	for i := range out {
		out[i].at.First = true
	}
	if c == "" {
		return out, nil
	}
	comps, err := splitCursor(c, shards, "task")
	if err != nil {
		return nil, err
	}
	for i, comp := range comps {
		switch comp {
		case cursorStart:
			continue
		case cursorDone:
			out[i].done = true
			continue
		}
		r, s, ok := strings.Cut(comp, ".")
		rank, err1 := strconv.ParseInt(r, 10, 64)
		skip, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil || rank < 0 || skip < 0 {
			return nil, badCursor("task", c, "is malformed")
		}
		out[i].at = engine.PendingCursor{Rank: rank, Skip: skip}
	}
	return out, nil
}

// splitCursor checks a cursor's shard count and returns its components.
func splitCursor(c string, shards int, what string) ([]string, error) {
	n, rest, ok := strings.Cut(c, ":")
	if !ok {
		return nil, badCursor(what, c, "is malformed")
	}
	if count, err := strconv.Atoi(n); err != nil || count != shards {
		return nil, badCursor(what, c, fmt.Sprintf("is not for a queue of %d shards", shards))
	}
	comps := strings.Split(rest, ",")
	if len(comps) != shards {
		return nil, badCursor(what, c, "is malformed")
	}
	return comps, nil
}

func badCursor(what, c, why string) error {
	return fmt.Errorf("inspect: %w: %s cursor %q %s; start again with an empty cursor", engine.ErrInvalid, what, c, why)
}

// Outcome is the kept outcome of a task that ended, as Outcomes lists it.
type Outcome struct {
	ID    string `json:"id"`
	Shard int    `json:"shard"`
	// State is "succeeded", "dead" or "cancelled".
	State string    `json:"state"`
	Ended time.Time `json:"ended"`
	// KeptUntil is when the outcome is forgotten; zero when it is kept for good.
	KeptUntil time.Time `json:"kept_until"`
	// ResultBytes is the size of a succeeded task's result; Error why a task died or was cancelled.
	ResultBytes int64  `json:"result_bytes"`
	Error       string `json:"error"`
}

// OutcomePage is one page of Outcomes.
type OutcomePage struct {
	Outcomes []Outcome `json:"outcomes"`
	// Next continues the listing; empty when the list ended.
	Next string `json:"next"`
	// Total counts the kept outcomes.
	Total int64 `json:"total"`
}

// Outcomes returns one page of the kept outcomes of queue's tasks, the tasks that ended and were
// published to keep their outcome (a result retention, a task waited for, a flow step): latest
// retention end first, which is most recently ended first among tasks kept equally long, merged
// over the shards. Tasks whose outcome is not kept leave nothing to list once acked. It costs per
// shard O(log n + limit) in three pipelined round trips. It fails with engine.ErrInvalid for a
// limit above MaxLimit or a malformed cursor, with engine.ErrNotFound for an unknown queue, and
// with Redis's error.
func (in *Inspector) Outcomes(ctx context.Context, queue, cursor string, limit int) (OutcomePage, error) {
	limit = cmp.Or(limit, DefaultPageLimit)
	if limit < 1 || limit > MaxLimit {
		return OutcomePage{}, fmt.Errorf("inspect: %w: outcome page limit %d is outside [1, %d]", engine.ErrInvalid, limit, MaxLimit)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return OutcomePage{}, err
	}
	comps, err := parseOutcomeCursor(cursor, len(engs))
	if err != nil {
		return OutcomePage{}, err
	}
	pages := make([]engine.OutcomePage, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		var err error
		if comps[i].done { // only its count
			pages[i].Total, err = in.client.ZCard(ctx, e.Keys().Outcomes()).Result()
			return err
		}
		pages[i], err = e.Outcomes(ctx, comps[i].at, limit)
		return err
	})
	if err != nil {
		return OutcomePage{}, fmt.Errorf("inspect: outcomes of %q: %w", queue, err)
	}
	type row struct {
		engine.KeptOutcome
		shard int
		idx   int
	}
	var rows []row
	out := OutcomePage{Outcomes: []Outcome{}}
	for i, pg := range pages {
		out.Total += pg.Total
		for j, o := range pg.Outcomes {
			rows = append(rows, row{o, i, j})
		}
	}
	until := func(o engine.KeptOutcome) int64 {
		if o.KeptUntil.IsZero() {
			return math.MaxInt64
		}
		return o.KeptUntil.UnixMilli()
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(until(b.KeptOutcome), until(a.KeptOutcome)), cmp.Compare(a.shard, b.shard))
	})
	rows = rows[:min(len(rows), limit)]
	last := make([]int, len(engs))
	for i := range last {
		last[i] = -1
	}
	for _, r := range rows {
		last[r.shard] = r.idx
		out.Outcomes = append(out.Outcomes, Outcome{ID: r.ID, Shard: r.shard, State: string(r.State), Ended: r.Ended,
			KeptUntil: r.KeptUntil, ResultBytes: r.ResultLen, Error: r.Error})
	}
	next := make([]outcomeCursor, len(engs))
	for i, pg := range pages {
		switch {
		case comps[i].done:
			next[i] = comps[i]
		case last[i] == len(pg.Outcomes)-1:
			next[i] = outcomeCursor{at: pg.Next, done: pg.Next.ID == ""}
		case last[i] < 0:
			next[i] = comps[i]
		default:
			o := pg.Outcomes[last[i]]
			score := math.Inf(1)
			if !o.KeptUntil.IsZero() {
				score = float64(o.KeptUntil.UnixMilli())
			}
			next[i] = outcomeCursor{at: engine.OutcomeCursor{ID: o.ID, Score: score}}
		}
	}
	out.Next = formatOutcomeCursor(next)
	return out, nil
}

// outcomeCursor is one shard's place in a walk of Outcomes.
type outcomeCursor struct {
	at   engine.OutcomeCursor
	done bool
}

// An outcome cursor is "<shards>:<component>,<component>…": per shard "" (not started), "x"
// (done) or "<score>~<id, base64url>".
func formatOutcomeCursor(cs []outcomeCursor) string {
	if !slices.ContainsFunc(cs, func(c outcomeCursor) bool { return !c.done }) {
		return ""
	}
	comps := make([]string, len(cs))
	for i, c := range cs {
		switch {
		case c.done:
			comps[i] = cursorDone
		case c.at.ID == "":
			comps[i] = cursorStart
		default:
			comps[i] = strconv.FormatFloat(c.at.Score, 'f', -1, 64) + "~" + base64.RawURLEncoding.EncodeToString([]byte(c.at.ID))
		}
	}
	return strconv.Itoa(len(cs)) + ":" + strings.Join(comps, ",")
}

func parseOutcomeCursor(c string, shards int) ([]outcomeCursor, error) {
	out := make([]outcomeCursor, shards)
	if c == "" {
		return out, nil
	}
	comps, err := splitCursor(c, shards, "outcome")
	if err != nil {
		return nil, err
	}
	for i, comp := range comps {
		switch comp {
		case cursorStart:
			continue
		case cursorDone:
			out[i].done = true
			continue
		}
		s, id, ok := strings.Cut(comp, "~")
		score, err1 := strconv.ParseFloat(s, 64)
		raw, err2 := base64.RawURLEncoding.DecodeString(id)
		if !ok || err1 != nil || err2 != nil || len(raw) == 0 || math.IsNaN(score) {
			return nil, badCursor("outcome", c, "is malformed")
		}
		out[i].at = engine.OutcomeCursor{ID: string(raw), Score: score}
	}
	return out, nil
}

// RunNow makes pending task id of queue available now (engine.RunNow): a delayed task, or one
// sent back with a delay, runs at the next fetch of its partition, after the tasks of its priority
// available already; an ordered partition blocked by a delayed retry goes on from its head. It
// asks every shard at once and returns the one that holds the task. It fails with
// engine.ErrNotPending for a task that is leased, a dead letter, a flow step waiting for its
// parents or ended with its outcome kept, with engine.ErrNotFound when no shard holds it (an acked
// task whose outcome is not kept) or the queue is unknown, with
// engine.ErrInvalid for an invalid id, and with Redis's error.
func (in *Inspector) RunNow(ctx context.Context, queue, id string) (int, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return 0, err
	}
	res := make([]error, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		errs, err := e.RunNow(ctx, []string{id})
		if err == nil {
			res[i] = errs[0]
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("inspect: run task %q of %q now: %w", id, queue, err)
	}
	for i, err := range res {
		switch {
		case err == nil:
			return i, nil
		case !errors.Is(err, engine.ErrNotFound):
			return i, fmt.Errorf("inspect: run task %q of %q now: %w", id, queue, err)
		}
	}
	return 0, fmt.Errorf("inspect: %w: no task %q in queue %q (an acked task is gone)", engine.ErrNotFound, id, queue)
}
