package srq

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// ErrShardCount is wrapped by the error for a queue configured with a shard count other than the
// one it is registered with in Redis.
var ErrShardCount = engine.ErrShardCount

// shardSet is a queue's shards, one engine each, and whether their count is registered yet.
type shardSet struct {
	client     redis.UniversalClient
	prefix     string
	name       string
	engines    []*engine.Engine
	registered atomic.Bool
}

func newShardSet(client redis.UniversalClient, cfg QueueConfig) (*shardSet, error) {
	if err := engine.ValidateQueueName(cfg.Name); err != nil {
		return nil, err
	}
	n := cmp.Or(cfg.Shards, 1)
	if n < 1 || n > engine.MaxShards {
		return nil, fmt.Errorf("%w: Shards %d is outside [1, %d]", ErrInvalid, cfg.Shards, engine.MaxShards)
	}
	s := &shardSet{client: client, prefix: cmp.Or(cfg.Prefix, engine.DefaultPrefix), name: cfg.Name}
	for i := 0; i < n; i++ {
		eng, err := engine.New(client, engine.Config{
			Queue: engine.ShardQueue(cfg.Name, n, i), Prefix: cfg.Prefix, DedupWindow: cfg.DedupWindow,
			DeadLetterMaxCount: cfg.DeadLetterMaxCount, DeadLetterMaxAge: cfg.DeadLetterMaxAge,
			CrashIsNotAttempt: cfg.CrashIsNotAttempt, MaxPayloadBytes: cfg.MaxPayloadBytes,
			ResultRetention: cfg.ResultRetention, MaxResultBytes: cfg.MaxResultBytes, Events: cfg.Events,
			Scripts: cfg.Scripts,
		})
		if err != nil {
			return nil, err
		}
		s.engines = append(s.engines, eng)
	}
	return s, nil
}

// of returns the engine of the shard that holds partition p.
func (s *shardSet) of(p partition.Key) *engine.Engine {
	return s.engines[engine.ShardOf(p, len(s.engines))]
}

// register records the queue's shard count in Redis the first time it succeeds, so that a
// producer or worker configured with another count is refused rather than looking for tasks in
// the wrong shards.
func (s *shardSet) register(ctx context.Context) error {
	if s.registered.Load() {
		return nil
	}
	if err := engine.RegisterQueue(ctx, s.client, s.prefix, s.name, len(s.engines)); err != nil {
		return err
	}
	for _, eng := range s.engines {
		if err := eng.AnnounceEvents(ctx); err != nil {
			return err
		}
	}
	s.registered.Store(true)
	return nil
}

// oversizedPart is the error of a batch whose part for shard k, n messages, is over engine.MaxBatch.
func oversizedPart(k, n int) error {
	return fmt.Errorf("%w: %d messages of the batch go to shard %d, over the limit of %d per call (engine.MaxBatch); nothing of the batch was written",
		ErrInvalid, n, k, engine.MaxBatch)
}

// publish publishes msgs, each to its partition's shard: one round trip per shard involved, run
// at once. What can be checked without Redis is checked for the whole batch first, so a batch
// refused by it writes nothing anywhere: each message, the priority levels the batch alone gives a
// partition, and the size of each shard's part (engine.MaxBatch). Each shard's part is then
// written whole or not at all, but across shards a publish is not atomic: when one shard's part is
// refused (ErrTooManyPriorities, which only Redis can tell, as the partition's pending tasks take
// levels too) or its call fails, the other shards may have written theirs. Messages without an id
// get one here; only messages with ids of their own can be published again to find out what was
// written (as duplicates), since a failed publish returns no ids.
func (s *shardSet) publish(ctx context.Context, msgs []engine.Message) ([]PublishResult, error) {
	// Checked before registering, so a refused batch leaves no trace in Redis.
	if err := s.engines[0].Validate(msgs); err != nil {
		return nil, err
	}
	// A part over the limit would be refused by its shard's engine after the other shards had
	// written theirs (and the queue been registered). The usual queue of one shard splits nothing.
	var byShard [][]int
	if len(s.engines) == 1 {
		if len(msgs) > engine.MaxBatch {
			return nil, oversizedPart(0, len(msgs))
		}
	} else {
		byShard = make([][]int, len(s.engines))
		for i := range msgs {
			k := engine.ShardOf(msgs[i].Partition, len(s.engines))
			byShard[k] = append(byShard[k], i)
		}
		for k, idx := range byShard {
			if len(idx) > engine.MaxBatch {
				return nil, oversizedPart(k, len(idx))
			}
		}
	}
	if err := s.register(ctx); err != nil {
		return nil, err
	}
	if len(s.engines) == 1 {
		return s.engines[0].Publish(ctx, msgs)
	}
	own := make([]engine.Message, len(msgs))
	for i := range msgs {
		own[i] = msgs[i]
		if own[i].ID == "" && own[i].Debounce == nil { // a debounced message takes no id
			own[i].ID = engine.NewID()
		}
	}
	out := make([]PublishResult, len(msgs))
	g, gctx := errgroup.WithContext(ctx)
	for k, idx := range byShard {
		if len(idx) == 0 {
			continue
		}
		g.Go(func() error {
			part := make([]engine.Message, len(idx))
			for j, i := range idx {
				part[j] = own[i]
			}
			res, err := s.engines[k].Publish(gctx, part)
			if err != nil {
				// The part of this shard was not written (or, after a lost reply, may have
				// been); the other shards' parts may have been.
				return fmt.Errorf("srq: publish to shard %d, whose part of the batch is %d of its messages (a message number below counts in that part; the other shards' parts may have been written): %w",
					k, len(idx), err)
			}
			for j, i := range idx {
				out[i] = res[j]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Stats reads the queue's sizes and counters, summed over its shards (ServerTime is the first
// shard's). It fails with the first shard's error, and with ErrInvalid for a nil or zero Queue.
func (q *Queue[T]) Stats(ctx context.Context) (engine.Stats, error) {
	if !q.made() {
		return engine.Stats{}, errNotMade
	}
	var sum engine.Stats
	for i, eng := range q.shards.engines {
		st, err := eng.Stats(ctx)
		if err != nil {
			return engine.Stats{}, fmt.Errorf("srq: stats of shard %d: %w", i, err)
		}
		if i == 0 {
			sum.ServerTime = st.ServerTime
		}
		sum.Pending += st.Pending
		sum.InFlight += st.InFlight
		sum.Dead += st.Dead
		sum.ReadyPartitions += st.ReadyPartitions
		sum.ScheduledPartitions += st.ScheduledPartitions
		sum.Published += st.Published
		sum.Duplicates += st.Duplicates
		sum.Acked += st.Acked
		sum.Rejected += st.Rejected
		sum.Recovered += st.Recovered
		sum.DeadLettered += st.DeadLettered
		sum.Requeued += st.Requeued
		sum.Purged += st.Purged
		sum.Trimmed += st.Trimmed
		sum.TakenBack += st.TakenBack
		sum.HandedBack += st.HandedBack
		sum.Waiting += st.Waiting
		sum.Cancelled += st.Cancelled
		sum.FlowsStarted += st.FlowsStarted
		sum.FlowsCompleted += st.FlowsCompleted
		sum.FlowsFailed += st.FlowsFailed
		sum.Replaced += st.Replaced
		sum.Dropped += st.Dropped
	}
	return sum, nil
}
