package srq

import (
	"context"
	"errors"
	"fmt"

	"github.com/srqueue/srq/engine"
)

var (
	// ErrCancelled is the cause of a handler's context ending because its task was cancelled
	// (Queue.Cancel) while it ran: errors.Is(context.Cause(ctx), srq.ErrCancelled). The task is
	// then not retried, whatever the handler returns but nil, which acks it.
	ErrCancelled = engine.ErrCancelled
	// ErrFinished is returned by Queue.Cancel for a task that has ended: a dead letter, or a
	// task acked or cancelled whose outcome is kept.
	ErrFinished = engine.ErrFinished
)

// Cancel cancels task id of q. A pending or delayed task leaves its partition at once, the order
// of the others kept, and never runs; a flow step waiting for its parents ends so, and its
// dependents are told as for a failure. For a running task Cancel returns once the request is
// recorded: the handler's context ends within a lease extension interval (WorkerConfig.Lease/3)
// with cause ErrCancelled, and the task is not retried (if its handler returns nil anyway, it is
// acked). A cancelled task's outcome is kept when it asked for that (ResultOf then fails with a
// *TaskFailedError of State "cancelled"). It fails with ErrFinished for a task that has ended,
// with ErrNotFound for an unknown task (or one acked whose outcome is not kept), with ErrInvalid
// for a nil or zero queue or an invalid id, and with the context's or Redis's error. On a sharded
// queue it asks every shard.
func (q *Queue[T]) Cancel(ctx context.Context, id string) error {
	if !q.made() {
		return errNotMade
	}
	var errs []error
	notFound := true
	for _, eng := range q.shards.engines {
		res, err := eng.Cancel(ctx, []string{id}, "cancelled")
		switch {
		case err != nil:
			errs = append(errs, err)
			notFound = false
		case res[0].Err == nil:
			return nil
		case !errors.Is(res[0].Err, ErrNotFound):
			return fmt.Errorf("srq: cancel %s: %w", id, res[0].Err)
		}
	}
	if !notFound {
		return errors.Join(errs...)
	}
	return fmt.Errorf("srq: cancel %s: %w", id, ErrNotFound)
}
