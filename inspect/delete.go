package inspect

import (
	"context"

	"github.com/srqueue/srq/engine"
)

// DeleteQueue deletes queue: every key of all its shards and its registry entry, and returns how
// many keys it deleted (engine.DeleteQueue). It refuses with an error wrapping
// engine.ErrQueueBusy while the queue's consumers are live, unless force is set, and fails with
// ErrInvalid for a bad name and with Redis's error.
func (in *Inspector) DeleteQueue(ctx context.Context, queue string, force bool) (int, error) {
	return engine.DeleteQueue(ctx, in.client, in.prefix, queue, force)
}
