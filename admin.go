package srq

import (
	"context"
	"fmt"

	"github.com/srqueue/srq/inspect"
)

// DeadQuery selects a page of dead letters: by partition, by error, from a cursor (package inspect).
type DeadQuery = inspect.DeadQuery

// DeadPage is a page of dead letters, newest first, and the cursor of the next (package inspect).
type DeadPage = inspect.DeadPage

// DeadLetter is a task that failed for good, with its payload as bytes (Queue.Decode decodes it).
type DeadLetter = inspect.DeadLetter

// inspector returns an Inspector over q's client and prefix, once the queue is registered (its
// first publish or worker registers it; this does it otherwise).
func (q *Queue[T]) inspector(ctx context.Context) (*inspect.Inspector, error) {
	if !q.made() {
		return nil, errNotMade
	}
	if err := q.shards.register(ctx); err != nil {
		return nil, err
	}
	return inspect.New(q.shards.client, inspect.Config{Prefix: q.shards.prefix})
}

// DeadLetters returns a page of q's dead letters, newest first, over every shard, selected by
// query (a partition, a substring of the error, a cursor from the last page). It costs O(page) in
// Redis. It fails with ErrInvalid for a nil or zero queue or an invalid query or cursor, and with
// the context's or Redis's error.
func (q *Queue[T]) DeadLetters(ctx context.Context, query DeadQuery) (DeadPage, error) {
	in, err := q.inspector(ctx)
	if err != nil {
		return DeadPage{}, err
	}
	return in.DeadLetters(ctx, q.name, query)
}

// Requeue moves the dead letters ids of q back to pending, as if newly published (behind the work
// pending in their partition, attempts reset, last error kept; a dead letter that holds its ordered
// partition goes back to its own place, the head), and returns how many it moved: ids that are not
// dead letters of q are skipped. A flow step requeued lets its flow go on. It fails with ErrInvalid
// for a nil or zero queue or an invalid id, and with the context's or Redis's error.
func (q *Queue[T]) Requeue(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	in, err := q.inspector(ctx)
	if err != nil {
		return 0, err
	}
	return in.RequeueDead(ctx, q.name, inspect.DeadSelector{IDs: ids})
}

// Purge deletes the dead letters ids of q and returns how many it deleted: ids that are not dead
// letters of q are skipped. A flow step purged has failed for good. It fails as Requeue does.
func (q *Queue[T]) Purge(ctx context.Context, ids ...string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	in, err := q.inspector(ctx)
	if err != nil {
		return 0, err
	}
	return in.PurgeDead(ctx, q.name, inspect.DeadSelector{IDs: ids})
}

// Decode decodes payload, a dead letter's or an inspected task's, into a T with q's codec. It
// fails with the codec's error, and with ErrInvalid for a nil or zero queue.
func (q *Queue[T]) Decode(payload []byte) (T, error) {
	var v T
	if !q.made() {
		return v, errNotMade
	}
	if err := q.codec.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("srq: decode with %s: %w", q.codec.Name(), err)
	}
	return v, nil
}
