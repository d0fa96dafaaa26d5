package inspect

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// PartitionTaskQuery selects a page of one partition's pending tasks for PartitionTasks.
type PartitionTaskQuery struct {
	// Delayed lists the tasks available later (delayed, scheduled, or sent back with a delay),
	// soonest first; false lists the tasks available now, in the order a fetch takes them.
	Delayed bool
	Page
}

// PendingTask is a pending task, as PartitionTasks lists it.
type PendingTask struct {
	ID          string    `json:"id"`
	Priority    int       `json:"priority"`
	AvailableAt time.Time `json:"available_at"` // server clock
	EnqueuedAt  time.Time `json:"enqueued_at"`
	Attempts    int       `json:"attempts"`     // deliveries so far
	MaxAttempts int       `json:"max_attempts"` // 0: unlimited
	LastError   string    `json:"last_error"`   // of its last delivery, when it was sent back
	// Debounce is the key and mode of a task a debounced publish added (srq.PublishOpts.Debounce),
	// null for others.
	Debounce *engine.DebounceInfo `json:"debounce"`
}

// PartitionTasks is one page of a partition's pending tasks.
type PartitionTasks struct {
	Partition partition.Key `json:"partition"`
	Shard     int           `json:"shard"`
	// Due counts the partition's tasks available now, Delayed those available later; a page lists
	// one kind.
	Due     int64         `json:"due"`
	Delayed int64         `json:"delayed"`
	Tasks   []PendingTask `json:"tasks"`
	// ServerTime is the Redis server's clock that split due from delayed.
	ServerTime time.Time `json:"server_time"`
}

// PartitionTasks returns one page of partition p's pending tasks, read from the partition's own
// pending sets on the shard that holds it (never a scan): with q.Delayed false the tasks available
// now, in the order a fetch takes them (priority high to low, then available-at, then publish
// order), else those available later, soonest first. A task's availability is its available-at:
// the due tasks of a paused or held partition are listed as due. It costs three round trips and
// O(levels · (log n + offset + limit)), levels being the partition's priority levels. It fails with
// engine.ErrInvalid for an invalid key, a negative offset, a limit above MaxLimit or an
// offset+limit above MaxOffset, with engine.ErrNotFound for an unknown queue, and with Redis's
// error.
func (in *Inspector) PartitionTasks(ctx context.Context, queue string, p partition.Key, q PartitionTaskQuery) (PartitionTasks, error) {
	if err := p.Validate(); err != nil {
		return PartitionTasks{}, fmt.Errorf("inspect: %w: %w", engine.ErrInvalid, err)
	}
	limit := cmp.Or(q.Limit, DefaultPageLimit)
	if q.Offset < 0 || limit < 1 || limit > MaxLimit || q.Offset > MaxOffset-limit {
		return PartitionTasks{}, fmt.Errorf("inspect: %w: partition task page offset %d limit %d (limit at most %d, offset+limit at most %d)",
			engine.ErrInvalid, q.Offset, limit, MaxLimit, MaxOffset)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return PartitionTasks{}, err
	}
	i := engine.ShardOf(p, len(engs))
	pg, err := engs[i].PartitionTasks(ctx, p, q.Delayed, q.Offset, limit)
	if err != nil {
		return PartitionTasks{}, fmt.Errorf("inspect: tasks of partition %q of %q: %w", string(p), queue, err)
	}
	out := PartitionTasks{Partition: p, Shard: i, Due: pg.Due, Delayed: pg.Delayed, ServerTime: pg.Now,
		Tasks: make([]PendingTask, len(pg.Tasks))}
	for j, t := range pg.Tasks {
		out.Tasks[j] = PendingTask{ID: t.ID, Priority: t.Priority, AvailableAt: t.AvailableAt, EnqueuedAt: t.EnqueuedAt,
			Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, LastError: t.LastError, Debounce: t.Debounce}
	}
	return out, nil
}
