package srq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/pool"
)

// SchedulerConfig configures a Scheduler. Zero values mean the documented defaults.
type SchedulerConfig struct {
	// Queues names the queues whose schedules the scheduler fires; one not registered yet (no
	// schedule, publish or worker so far) is looked up again on every pass until it is. Default:
	// every queue registered under Prefix (a queue registers when it first publishes, is
	// scheduled, or a worker starts on it), looked up again every QueuesRefresh.
	Queues []string
	// Prefix starts the queues' Redis keys. Default "srq".
	Prefix string
	// PollInterval is the longest the scheduler waits before it looks at the due schedules
	// again; it sleeps until the next schedule it knows of is due, so this bounds only how late
	// it sees a schedule created or changed meanwhile. Default 1s.
	PollInterval time.Duration
	// QueuesRefresh is how often the queues, their shard counts and the size of their event
	// streams (QueueConfig.Events, as the queue announced it in Redis) are looked up again.
	// Default 10s.
	QueuesRefresh time.Duration
	// Logger receives what the scheduler does: each tick published (Debug), ticks missed (Warn),
	// errors (Error). Default slog.Default().
	Logger *slog.Logger
}

// Scheduler fires the schedules of one or more queues: it publishes each tick's task (or flow)
// when the tick is due by the Redis server's clock. Any number of schedulers may
// fire the same schedules at once, in any number of processes: each tick is published once
// (docs/schedules.md), so there is no leader to elect and a replica killed at any moment loses
// nothing. It needs no payload type: it publishes the stored, encoded payload. Make one with
// NewScheduler.
type Scheduler struct {
	client  redis.UniversalClient
	cfg     SchedulerConfig
	log     *slog.Logger
	running atomic.Bool

	refreshed time.Time
	engines   []queueEngines
	missing   bool // a queue of cfg.Queues is not registered yet
}

// queueEngines is a queue's shard engines.
type queueEngines struct {
	name string
	engs []*engine.Engine
}

// NewScheduler returns a scheduler of cfg.Queues (every registered queue when empty) on client.
// It does not talk to Redis. It fails with ErrInvalid for a nil client, an invalid queue name or
// prefix, or a negative interval.
func NewScheduler(client redis.UniversalClient, cfg SchedulerConfig) (*Scheduler, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, engine.DefaultPrefix)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.QueuesRefresh = cmp.Or(cfg.QueuesRefresh, 10*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.PollInterval < 0 || cfg.QueuesRefresh < 0 {
		return nil, fmt.Errorf("%w: negative PollInterval or QueuesRefresh", ErrInvalid)
	}
	if _, err := engine.NewKeys(cfg.Prefix, "q"); err != nil { // the prefix, also with no Queues
		return nil, err
	}
	for _, q := range cfg.Queues {
		if _, err := engine.NewKeys(cfg.Prefix, q); err != nil {
			return nil, err
		}
	}
	cfg.Queues = append([]string(nil), cfg.Queues...)
	return &Scheduler{client: client, cfg: cfg, log: cfg.Logger}, nil
}

// Run fires due ticks until ctx ends, then returns nil. A failure to reach Redis is logged and
// tried again every PollInterval; it never ends Run. It fails with ErrRunning when the scheduler
// is running already (one Run or Fire at a time).
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	return pool.FireLoop(ctx, s.cfg.PollInterval, s.log, s.fire)
}

// Fire publishes every tick that is due now, once, and returns them: for a process that runs from
// cron itself, and for tests. A queue whose registered shard count is unusable
// (engine.StoredShardCountError) is skipped and logged; the others are fired. It fails with
// ErrRunning while Run runs, with Redis's error of looking up the queues, and with the joined
// errors of the shards it could not fire (the others are fired).
func (s *Scheduler) Fire(ctx context.Context) ([]FiredTick, error) {
	if !s.running.CompareAndSwap(false, true) {
		return nil, ErrRunning
	}
	defer s.running.Store(false)
	_, fired, err := s.fire(ctx)
	return fired, err
}

// fire is one pass over the queues: it returns how long until the next known tick.
func (s *Scheduler) fire(ctx context.Context) (time.Duration, []engine.FiredTick, error) {
	if s.engines == nil || s.missing || time.Since(s.refreshed) >= s.cfg.QueuesRefresh {
		if err := s.refresh(ctx); err != nil {
			return s.cfg.PollInterval, nil, err
		}
	}
	wait := s.cfg.PollInterval
	var fired []engine.FiredTick
	var errs []error
	for _, q := range s.engines {
		w, f, err := pool.FireShards(ctx, q.name, q.engs, s.log)
		wait = min(wait, w)
		fired = append(fired, f...)
		errs = append(errs, err)
	}
	return wait, fired, errors.Join(errs...)
}

// refresh looks up the queues, their shard counts and their event streams.
func (s *Scheduler) refresh(ctx context.Context) error {
	var names []string
	counts := map[string]int{}
	missing := false
	if len(s.cfg.Queues) == 0 {
		qs, err := engine.Queues(ctx, s.client, s.cfg.Prefix)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Err != nil {
				s.log.Error("srq: scheduler skips a queue", "queue", q.Name, "err", q.Err)
				continue
			}
			names = append(names, q.Name)
			counts[q.Name] = q.Shards
		}
	} else {
		for _, name := range s.cfg.Queues {
			n, err := engine.QueueShards(ctx, s.client, s.cfg.Prefix, name)
			if errors.Is(err, engine.ErrQueueNotFound) {
				missing = true // nothing was scheduled on it yet: Schedule registers the queue
				continue
			}
			var unusable *engine.StoredShardCountError
			if errors.As(err, &unusable) { // as with every queue: the others still fire
				s.log.Error("srq: scheduler skips a queue", "queue", name, "err", err)
				continue
			}
			if err != nil {
				return err
			}
			names = append(names, name)
			counts[name] = n
		}
	}
	engines := make([]queueEngines, 0, len(names))
	for _, name := range names {
		q := queueEngines{name: name}
		for i := range counts[name] {
			e, err := s.shardEngine(ctx, engine.ShardQueue(name, counts[name], i))
			if err != nil {
				return err
			}
			q.engs = append(q.engs, e)
		}
		engines = append(engines, q)
	}
	s.engines, s.refreshed, s.missing = engines, time.Now(), missing
	return nil
}

// shardEngine returns an engine of the queue (shard) named queue that writes the queue's events
// when the queue keeps an event stream: the scheduler does not know the queue's QueueConfig, so it
// reads the stream's size the queue announced in Redis (engine.AnnouncedEvents), and a tick's task
// writes its published event as a publish of the queue's own does.
func (s *Scheduler) shardEngine(ctx context.Context, queue string) (*engine.Engine, error) {
	keys, err := engine.NewKeys(s.cfg.Prefix, queue)
	if err != nil {
		return nil, err
	}
	n, err := engine.AnnouncedEvents(ctx, s.client, keys)
	if err != nil {
		return nil, err
	}
	return engine.New(s.client, engine.Config{Queue: queue, Prefix: s.cfg.Prefix, Events: n})
}
