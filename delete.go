package srq

import (
	"cmp"
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
)

// ErrQueueBusy is wrapped by the error of DeleteQueue for a queue whose consumers are live.
var ErrQueueBusy = engine.ErrQueueBusy

// DeleteQueueOpts are the options of DeleteQueue.
type DeleteQueueOpts struct {
	// Prefix is the queue's key prefix. Default "srq".
	Prefix string
	// Force deletes the queue even while consumers are live.
	Force bool
}

// DeleteQueue deletes queue name on client: every key of all its shards (tasks, dead letters,
// counters, flows, results, events) and its registry entry, so it no longer shows in `srq queues`
// or the dashboard. It returns how many keys it deleted. Stop the queue's producers and workers
// first: their next calls would write keys anew. It refuses, deleting nothing, with an error
// wrapping ErrQueueBusy while a worker fetched from the queue within the last 30 seconds (a worker
// whose Run returned has left the queue's consumers and does not count), unless opts.Force is set. It finds the keys with SCAN: an operator's command, not for a hot path. It
// fails with ErrInvalid for a nil client or a bad name, and with the context's or Redis's error,
// after which some keys may be gone.
func DeleteQueue(ctx context.Context, client redis.UniversalClient, name string, opts *DeleteQueueOpts) (int, error) {
	var o DeleteQueueOpts
	if opts != nil {
		o = *opts
	}
	return engine.DeleteQueue(ctx, client, cmp.Or(o.Prefix, engine.DefaultPrefix), name, o.Force)
}
