package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/srqueue/srq/engine"
)

// DefaultCancelReason is the reason Cancel records when it is given none.
const DefaultCancelReason = "cancelled by an operator"

// CancelResult tells what Cancel did.
type CancelResult struct {
	Shard int `json:"shard"` // the shard that holds the task
	// Running is true for a task that was leased: it is marked, its worker cancels its handler at
	// the next lease extension (within a third of its lease) and ends it as cancelled; if its lease
	// expires first, recovery cancels it. False: the task was pending, delayed or a flow step
	// waiting for its parents, and is cancelled now.
	Running bool `json:"running"`
}

// Cancel cancels task id of queue, recording reason (DefaultCancelReason when empty) as why: a
// pending or delayed task leaves its partition (the others keep their order) and never runs; a
// flow step waiting for its parents ends so, and its dependents are told as for a failure; a
// leased task is marked (CancelResult.Running). A cancelled task is not retried. It asks every
// shard of queue at once, one round trip each. It fails with engine.ErrFinished for a task that
// has ended (a dead letter, or one whose outcome is kept), with engine.ErrNotFound when no shard
// holds the task or the queue is unknown, with engine.ErrInvalid for an invalid id, and with
// Redis's error.
func (in *Inspector) Cancel(ctx context.Context, queue, id, reason string) (CancelResult, error) {
	engs, err := in.writers(ctx, queue)
	if err != nil {
		return CancelResult{}, err
	}
	res := make([]engine.CancelResult, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		rs, err := e.Cancel(ctx, []string{id}, cmp.Or(reason, DefaultCancelReason))
		if err == nil {
			res[i] = rs[0]
		}
		return err
	})
	if err != nil {
		return CancelResult{}, fmt.Errorf("inspect: cancel task %q of %q: %w", id, queue, err)
	}
	for i, r := range res {
		switch {
		case r.Err == nil:
			return CancelResult{Shard: i, Running: r.Running}, nil
		case !errors.Is(r.Err, engine.ErrNotFound):
			return CancelResult{Shard: i}, fmt.Errorf("inspect: cancel task %q of %q: %w", id, queue, r.Err)
		}
	}
	return CancelResult{}, fmt.Errorf("inspect: %w: no task %q in queue %q to cancel (an acked task is gone)",
		engine.ErrNotFound, id, queue)
}
