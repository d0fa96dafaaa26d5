package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// Default page sizes and scan windows.
const (
	DefaultPartitionLimit = 20
	DefaultPageLimit      = 50
	DefaultDeadWindow     = 1000
	// MaxDeadWindow is the most dead letters one DeadLetters call looks at per shard.
	MaxDeadWindow = 2000
	// consumersPerShard is how many of each shard's most recent consumers Stats lists.
	consumersPerShard = 100
	// fanOut is how many shards are asked at once.
	fanOut = 16
)

// Inspector reads and steers the queues under one key prefix. It is safe for concurrent use.
type Inspector struct {
	client redis.UniversalClient
	prefix string
}

// New returns an Inspector over client. It talks to Redis only when called. It fails with
// engine.ErrInvalid for a nil client or an invalid prefix.
func New(client redis.UniversalClient, cfg Config) (*Inspector, error) {
	prefix := cmp.Or(cfg.Prefix, engine.DefaultPrefix)
	if _, err := engine.New(client, engine.Config{Queue: "x", Prefix: prefix}); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return &Inspector{client: client, prefix: prefix}, nil
}

// Prefix returns the key prefix the Inspector works under.
func (in *Inspector) Prefix() string { return in.prefix }

// Queues returns the registered queues, sorted by name. A queue registers when it first publishes
// or a worker starts on it; a queue used only through package engine is not listed, but every
// other call finds it by name. A queue whose stored shard count is invalid is listed with
// QueueInfo.Err set (wrapping engine.ErrInvalid), and every other call on it fails with that error;
// the other queues are listed as usual. It fails with the context's or Redis's error.
func (in *Inspector) Queues(ctx context.Context) ([]engine.QueueInfo, error) {
	qs, err := engine.Queues(ctx, in.client, in.prefix)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return qs, nil
}

// shards returns an engine per shard of queue. An unregistered queue counts as one shard when any
// of its queue-wide keys exists. It fails with engine.ErrInvalid for a bad name or an invalid shard
// count stored for the queue, with engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) shards(ctx context.Context, queue string) ([]*engine.Engine, error) {
	n, err := engine.QueueShards(ctx, in.client, in.prefix, queue)
	if errors.Is(err, engine.ErrNotFound) {
		keys, kerr := engine.NewKeys(in.prefix, queue)
		if kerr != nil {
			return nil, fmt.Errorf("inspect: %w", kerr)
		}
		found, xerr := in.client.Exists(ctx, keys.Stats(), keys.Seq(), keys.Dead(), keys.Inflight(), keys.Depth(),
			keys.QueuePause(), keys.Ctl()).Result()
		if xerr != nil {
			return nil, fmt.Errorf("inspect: look up queue %q: %w", queue, xerr)
		}
		if found == 0 {
			return nil, fmt.Errorf("inspect: %w: no queue %q under prefix %q (srq queues lists the registered ones)",
				engine.ErrQueueNotFound, queue, in.prefix)
		}
		n, err = 1, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	engs := make([]*engine.Engine, n)
	for i := range engs {
		if engs[i], err = engine.New(in.client, engine.Config{Queue: engine.ShardQueue(queue, n, i), Prefix: in.prefix}); err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
	}
	return engs, nil
}

// writers returns an engine per shard of queue, as shards does, for calls that change the queue:
// each writes the queue's events (a requeue, a purge, a cancel, a resume) when its shard keeps an
// event stream (engine.AnnouncedEvents), as the queue's own engines do. One more round trip per
// shard. It fails as shards does.
func (in *Inspector) writers(ctx context.Context, queue string) ([]*engine.Engine, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, err
	}
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		n, err := engine.AnnouncedEvents(ctx, in.client, e.Keys())
		if err != nil || n == 0 {
			return err
		}
		cfg := e.Config()
		cfg.Events = n
		engs[i], err = engine.New(in.client, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return engs, nil
}

// each runs f on every shard, a few at once, and returns the first error.
func each(ctx context.Context, engs []*engine.Engine, f func(ctx context.Context, i int, e *engine.Engine) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fanOut)
	for i, e := range engs {
		g.Go(func() error { return f(ctx, i, e) })
	}
	return g.Wait()
}

// Stats returns queue's sizes, counters, pause state and recent consumers, summed over its shards;
// two round trips per shard. It fails with engine.ErrNotFound for an unknown queue, with
// engine.ErrInvalid for a bad name, and with Redis's error.
func (in *Inspector) Stats(ctx context.Context, queue string) (Stats, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return Stats{}, err
	}
	ovs := make([]engine.Overview, len(engs))
	xs := make([]engine.ExtraStats, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		var err error
		if ovs[i], err = e.Overview(ctx, consumersPerShard); err != nil {
			return err
		}
		xs[i], err = e.ExtraStats(ctx)
		return err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("inspect: stats of %q: %w", queue, err)
	}
	s := Stats{Queue: queue, Shards: len(engs), Consumers: []Consumer{}}
	listedAll := true // every shard listed all of its consumers: their union is the exact count
	for i, o := range ovs {
		s.Pending += o.Pending
		s.InFlight += o.InFlight
		s.Dead += o.Dead
		s.PendingPartitions += o.PendingPartitions
		s.ReadyPartitions += o.ReadyPartitions
		s.ScheduledPartitions += o.ScheduledPartitions
		s.BlockedPartitions += max(0, o.PendingPartitions-o.ReadyPartitions-o.ScheduledPartitions)
		s.PausedPartitions += o.PausedPartitions
		if !o.PausedAt.IsZero() {
			s.PausedShards++
		}
		c := &s.Counters
		c.Published += o.Published
		c.Duplicates += o.Duplicates
		c.Acked += o.Acked
		c.Rejected += o.Rejected
		c.TakenBack += o.TakenBack
		c.HandedBack += o.HandedBack
		c.Recovered += o.Recovered
		c.DeadLettered += o.DeadLettered
		c.Requeued += o.Requeued
		c.Purged += o.Purged
		c.Trimmed += o.Trimmed
		c.Replaced += o.Replaced
		c.Dropped += o.Dropped
		x := xs[i]
		c.Cancelled += x.Cancelled
		c.FlowsStarted += x.FlowsStarted
		c.FlowsCompleted += x.FlowsCompleted
		c.FlowsFailed += x.FlowsFailed
		s.Waiting += x.Waiting
		s.HeldPartitions += x.HeldPartitions
		s.RunningFlows += x.FlowsRunning
		s.EndedFlows += x.FlowsEnded
		// A worker serves every shard, so it is seen in each: a sum would count it once per shard.
		s.ConsumerCount = max(s.ConsumerCount, o.ConsumerCount)
		listedAll = listedAll && o.ConsumerCount <= int64(len(o.Consumers))
		for _, sc := range o.Consumers {
			live := o.ServerTime.Sub(sc.LastSeen) <= engine.ConsumerLive
			s.Consumers = append(s.Consumers, Consumer{ID: sc.ID, Shard: i, LastSeen: sc.LastSeen, Live: live})
		}
		if o.ServerTime.After(s.ServerTime) {
			s.ServerTime = o.ServerTime
		}
	}
	s.Paused = s.PausedShards == len(engs)
	// A consumer serving several shards is listed once, with its latest heartbeat.
	slices.SortFunc(s.Consumers, func(a, b Consumer) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.ID, b.ID))
	})
	seen := map[string]bool{}
	s.Consumers = slices.DeleteFunc(s.Consumers, func(c Consumer) bool {
		dup := seen[c.ID]
		seen[c.ID] = true
		return dup
	})
	for _, c := range s.Consumers {
		if c.Live {
			s.LiveConsumers++
		}
	}
	if listedAll || int64(len(s.Consumers)) > s.ConsumerCount {
		s.ConsumerCount = int64(len(s.Consumers))
	}
	return s, nil
}

// Partitions returns the first q.Limit partitions of queue in the order q.By asks for, merged over
// the shards: each shard gives its own first q.Limit, so the cost is O(shards · (log n + limit)).
// It fails with engine.ErrInvalid for an unknown order or a limit above MaxLimit, with
// engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) Partitions(ctx context.Context, queue string, q PartitionQuery) ([]Partition, error) {
	limit := cmp.Or(q.Limit, DefaultPartitionLimit)
	if limit < 1 || limit > MaxLimit {
		return nil, fmt.Errorf("inspect: %w: partition limit %d is outside [1, %d]", engine.ErrInvalid, limit, MaxLimit)
	}
	var index engine.PartitionIndex
	switch q.By {
	case ByDepth:
		index = engine.IndexDepth
	case ByAge:
		index = engine.IndexAge
	case ByPaused:
		index = engine.IndexPaused
	case ByHeld:
		return in.heldPartitions(ctx, queue, limit)
	default:
		return nil, fmt.Errorf("inspect: %w: unknown partition order %v", engine.ErrInvalid, q.By)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, err
	}
	per := make([][]Partition, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		infos, now, err := e.PartitionsBy(ctx, index, limit)
		for _, pi := range infos {
			per[i] = append(per[i], partitionOf(pi, i, now))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: partitions of %q: %w", queue, err)
	}
	all := slices.Concat(per...)
	slices.SortStableFunc(all, func(a, b Partition) int {
		switch q.By {
		case ByDepth:
			return cmp.Compare(b.Pending, a.Pending)
		case ByAge:
			return a.HeadAvailableAt.Compare(b.HeadAvailableAt)
		default:
			return a.PausedAt.Compare(b.PausedAt)
		}
	})
	if all == nil {
		all = []Partition{} // an empty page, not null, in JSON
	}
	return all[:min(len(all), limit)], nil
}

// Partition describes partition p of queue, on the shard that holds it. It fails with
// engine.ErrInvalid for an invalid key, with engine.ErrNotFound for an unknown queue, and with
// Redis's error. A partition with nothing pending, leased or controlled is reported empty.
func (in *Inspector) Partition(ctx context.Context, queue string, p partition.Key) (Partition, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return Partition{}, err
	}
	i := engine.ShardOf(p, len(engs))
	infos, now, err := engs[i].Partitions(ctx, p)
	if err != nil {
		return Partition{}, fmt.Errorf("inspect: partition %q of %q: %w", string(p), queue, err)
	}
	if len(infos) != 1 {
		return Partition{}, fmt.Errorf("inspect: partition %q of %q: %d rows for one key", string(p), queue, len(infos))
	}
	return partitionOf(infos[0], i, now), nil
}

// partitionOf turns the engine's description of a partition on shard i into the Inspector's.
func partitionOf(pi engine.PartitionInfo, shard int, now time.Time) Partition {
	p := Partition{Key: pi.Key, Shard: shard, Pending: pi.Pending, HeadAvailableAt: pi.HeadAvailableAt,
		Paused: pi.Paused(), PausedAt: pi.PausedAt, Limit: pi.Limit, Leased: pi.Leased, NextDue: pi.DueAt,
		HeldBy: pi.HeldBy, HeldError: pi.HeldError}
	if pi.BlockedUntil.After(now) {
		p.BlockedUntil = pi.BlockedUntil
	}
	switch {
	case p.HeldBy != "":
		p.State = PartitionHeldByDeadLetter
	case p.Paused:
		p.State = PartitionPaused
	case pi.Ready:
		p.State = PartitionReady
	case !pi.DueAt.IsZero():
		p.State = PartitionScheduled
	case p.Pending > 0:
		p.State = PartitionHeld
	default:
		p.State = PartitionEmpty
	}
	return p
}

// InFlight returns one page of queue's leased tasks, earliest lease deadline first, merged over
// the shards. It costs O(shards · (log n + offset + limit)). It fails with engine.ErrInvalid for a
// negative offset, a limit above MaxLimit or an offset+limit above MaxOffset, with
// engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) InFlight(ctx context.Context, queue string, page Page) ([]InFlightTask, error) {
	limit := cmp.Or(page.Limit, DefaultPageLimit)
	// The offset is compared with MaxOffset-limit: Offset+limit could overflow.
	if page.Offset < 0 || limit < 1 || limit > MaxLimit || page.Offset > MaxOffset-limit {
		return nil, fmt.Errorf("inspect: %w: in-flight page offset %d limit %d (limit at most %d, offset+limit at most %d)",
			engine.ErrInvalid, page.Offset, limit, MaxLimit, MaxOffset)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, err
	}
	// With one shard the page is read as it is; with more, each shard's first offset+limit are
	// merged and the page cut from the merge.
	offset, count := page.Offset, limit
	if len(engs) > 1 {
		offset, count = 0, page.Offset+limit
	}
	per := make([][]InFlightTask, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		leases, _, err := e.InFlight(ctx, offset, count)
		for _, l := range leases {
			per[i] = append(per[i], InFlightTask{ID: l.ID, Shard: i, Partition: l.Partition, Priority: l.Priority,
				Attempt: l.Attempt, MaxAttempts: l.MaxAttempts, Crashes: l.Crashes, Consumer: l.Consumer,
				LeaseDeadline: l.Deadline, EnqueuedAt: l.EnqueuedAt})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: in-flight tasks of %q: %w", queue, err)
	}
	all := slices.Concat(per...)
	if len(engs) == 1 {
		if all == nil {
			all = []InFlightTask{}
		}
		return all, nil
	}
	slices.SortStableFunc(all, func(a, b InFlightTask) int {
		return cmp.Or(a.LeaseDeadline.Compare(b.LeaseDeadline), cmp.Compare(a.Shard, b.Shard))
	})
	if page.Offset >= len(all) {
		return []InFlightTask{}, nil
	}
	return all[page.Offset:min(len(all), page.Offset+limit)], nil
}

// Task returns task id of queue, looked up on every shard, with what a dynamic workflow keeps of
// it: its children and what it waits for (one or two more round trips for a task of a workflow).
// It fails with engine.ErrNotFound when no shard holds it (never published, or acked) or the queue
// is unknown, with engine.ErrInvalid for an invalid id, and with Redis's error.
func (in *Inspector) Task(ctx context.Context, queue, id string) (Task, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return Task{}, err
	}
	found := make([]*Task, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		t, err := e.Task(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err == nil {
			found[i] = &Task{TaskInfo: t, Shard: i}
		}
		return err
	})
	if err != nil {
		return Task{}, fmt.Errorf("inspect: task %q of %q: %w", id, queue, err)
	}
	for i, t := range found {
		if t != nil {
			if err := workflowOf(ctx, engs[i], t); err != nil {
				return Task{}, fmt.Errorf("inspect: task %q of %q: %w", id, queue, err)
			}
			return *t, nil
		}
	}
	return Task{}, fmt.Errorf("inspect: %w: no task %q in queue %q (acked tasks are gone)", engine.ErrNotFound, id, queue)
}

// PausePartition pauses partition p of queue: it hands out no work until ResumePartition; its
// pending and leased tasks stay as they are. It fails with engine.ErrInvalid for an invalid key,
// with engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) PausePartition(ctx context.Context, queue string, p partition.Key) error {
	return in.onPartition(ctx, queue, p, "pause", (*engine.Engine).Pause)
}

// ResumePartition resumes a paused partition of queue, and releases one held by a dead letter
// (the dead letter stays); resuming one that is neither does nothing. It fails as PausePartition
// does.
func (in *Inspector) ResumePartition(ctx context.Context, queue string, p partition.Key) error {
	return in.onPartition(ctx, queue, p, "resume", (*engine.Engine).Resume)
}

func (in *Inspector) onPartition(ctx context.Context, queue string, p partition.Key, what string,
	f func(*engine.Engine, context.Context, partition.Key) error) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("inspect: %w: %w", engine.ErrInvalid, err)
	}
	engs, err := in.writers(ctx, queue)
	if err != nil {
		return err
	}
	if err := f(engs[engine.ShardOf(p, len(engs))], ctx, p); err != nil {
		return fmt.Errorf("inspect: %s partition %q of %q: %w", what, string(p), queue, err)
	}
	return nil
}

// PauseQueue pauses every shard of queue: fetches hand out nothing until ResumeQueue, while
// publishes, acks, rejects, lease extensions and recovery go on. It fails with engine.ErrNotFound
// for an unknown queue and with Redis's error; after an error some shards may be paused, and
// calling it again pauses the rest.
func (in *Inspector) PauseQueue(ctx context.Context, queue string) error {
	return in.onQueue(ctx, queue, "pause", (*engine.Engine).PauseQueue)
}

// ResumeQueue resumes every shard of queue and wakes blocked fetchers. It fails as PauseQueue does.
func (in *Inspector) ResumeQueue(ctx context.Context, queue string) error {
	return in.onQueue(ctx, queue, "resume", (*engine.Engine).ResumeQueue)
}

func (in *Inspector) onQueue(ctx context.Context, queue, what string, f func(*engine.Engine, context.Context) error) error {
	engs, err := in.writers(ctx, queue)
	if err != nil {
		return err
	}
	if err := each(ctx, engs, func(ctx context.Context, _ int, e *engine.Engine) error { return f(e, ctx) }); err != nil {
		return fmt.Errorf("inspect: %s queue %q: %w", what, queue, err)
	}
	return nil
}

// itoa is strconv.Itoa, kept short for String methods.
func itoa(n int) string { return strconv.Itoa(n) }
