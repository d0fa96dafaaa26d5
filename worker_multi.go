package srq

import (
	"fmt"
	"sync/atomic"

	"github.com/srqueue/srq/internal/pool"
)

// ServeOpts are the options of one queue a worker serves (Serve). The zero value means the
// defaults.
type ServeOpts struct {
	// Weight is the queue's share of the worker's fetches against the other queues' weights: under
	// load, queues of weights 3, 2 and 1 get about 3/6, 2/6 and 1/6 of the tasks the worker runs. A
	// queue with work gets its turns whatever the others' backlogs, so a flooded queue cannot
	// starve another; a queue without work lends its share to the others, and earns no credit
	// while idle. Default 1; negative: NewWorkerOf fails with ErrInvalid.
	Weight int
}

// Served is one queue and its handler, for NewWorkerOf. Make one with Serve; the zero Served makes
// NewWorkerOf fail with ErrInvalid.
type Served struct {
	shards *shardSet
	weight int
	// batchSize is the queue's BatchConfig.MaxSize when it is served in batches (ServeBatches); 0
	// for a Handler.
	batchSize int
	err       error // what Serve found wrong, reported by NewWorkerOf
	source    func(cfg WorkerConfig, decodeLogged *atomic.Bool) (pool.Source, error)
}

// Serve pairs q with the handler h, with opts (nil for the defaults), for NewWorkerOf. It does not
// fail: what is wrong (a nil or zero queue, a nil handler) is reported by NewWorkerOf.
func Serve[T any](q *Queue[T], h Handler[T], opts *ServeOpts) Served {
	if opts == nil {
		opts = &ServeOpts{}
	}
	switch {
	case !q.made():
		return Served{err: errNotMade}
	case nilHandler(h):
		return Served{err: fmt.Errorf("%w: nil handler for queue %s", ErrInvalid, q.name)}
	}
	return Served{shards: q.shards, weight: opts.Weight,
		source: func(cfg WorkerConfig, decodeLogged *atomic.Bool) (pool.Source, error) {
			return source(q, h, cfg, decodeLogged)
		}}
}

// NewWorkerOf returns a worker that serves every queue of served, each with its own handler and
// payload type, with one bounded pool: Concurrency handlers and Concurrency+Prefetch held tasks
// in all, shared by the queues by their weights (ServeOpts.Weight). Everything else works as on a
// worker of one queue (NewWorker): ordered partitions, leases and their extension, recovery,
// batched acks, flows and schedules, and graceful shutdown, each queue with its own calls, and
// cfg's middleware wraps every queue's handler.
//
// While queues have no work, the worker waits for all of them in one blocking call to Redis, and
// looks at one idle queue per PollWait besides: an idle worker of many queues makes no more calls
// to fetch than one of a single queue. That needs their keys on one server: queues on one
// single-node or Sentinel client share that wait; on a Cluster (or Ring) client each queue lives
// in its own slot and has a wait, so a blocked connection, of its own. Queues may be on different
// clients: each client's queues have their own wait.
//
// It fails with ErrInvalid for no queue, a nil or zero queue, a nil handler, a negative weight, a
// queue served twice (same prefix and name), a nil middleware, or an invalid configuration.
func NewWorkerOf(cfg WorkerConfig, served ...Served) (*Worker, error) {
	if len(served) == 0 {
		return nil, fmt.Errorf("%w: NewWorkerOf: no queue to serve", ErrInvalid)
	}
	cfg, err := batchDefaults(cfg, served...)
	if err != nil {
		return nil, err
	}
	w := &Worker{log: cfg.Logger.With("consumer", cfg.ConsumerID)}
	w.card = newCard(cfg, nil, w.log)
	seen := map[string]bool{}
	var srcs []pool.Source
	for i, s := range served {
		switch {
		case s.err != nil:
			return nil, fmt.Errorf("NewWorkerOf: queue %d: %w", i, s.err)
		case s.shards == nil:
			return nil, fmt.Errorf("%w: NewWorkerOf: queue %d: a Served not made by Serve", ErrInvalid, i)
		case s.weight < 0:
			return nil, fmt.Errorf("%w: NewWorkerOf: queue %s: negative Weight %d", ErrInvalid, s.shards.name, s.weight)
		}
		key := s.shards.prefix + "\x00" + s.shards.name
		if seen[key] {
			return nil, fmt.Errorf("%w: NewWorkerOf: queue %s is served twice", ErrInvalid, s.shards.name)
		}
		seen[key] = true
		logged := new(atomic.Bool)
		src, err := s.source(cfg, logged)
		if err != nil {
			return nil, err
		}
		w.decodeLogged = append(w.decodeLogged, logged)
		src.Weight = max(s.weight, 1)
		if src.Batch != nil {
			src.Batch.Handle = w.card.countingBatch(src.Batch.Handle)
		} else {
			src.Handle = w.card.counting(src.Handle)
		}
		srcs = append(srcs, src)
		w.queues = append(w.queues, s.shards)
	}
	w.card.queues = w.queues
	w.pool = pool.New(poolConfig(cfg, w.log), srcs)
	return w, nil
}
