package engine

import (
	"context"
	"fmt"
	"slices"
)

// CancelResult tells what Cancel did with one task.
type CancelResult struct {
	// Running is true for a leased task: it is marked, and the next extension of its lease tells
	// its holder (Extend reports ErrCancelled), which cancels its handler and settles the task
	// with CancelLeased; if its lease expires first, recovery cancels it.
	Running bool
	// Err is nil (cancelled, or marked when Running), ErrFinished or ErrNotFound.
	Err error
}

// Cancel cancels tasks in one round trip, recording reason as why. A pending or delayed task
// leaves its partition at once (the order of the others is kept) and is not run; a flow step
// waiting for its parents ends so, and its dependents are told as for a failure; a leased task is
// marked to be cancelled by its holder (CancelResult.Running). A cancelled task is not retried;
// its outcome is kept when it asked for that (Outcome). It fails with ErrInvalid for an invalid
// id, and with the context's or Redis's error.
func (e *Engine) Cancel(ctx context.Context, ids []string, reason string) ([]CancelResult, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxBatch {
		return nil, invalidf("a cancel of %d tasks is over the limit of %d (MaxBatch)", len(ids), MaxBatch)
	}
	args := make([]any, 0, 2+len(ids))
	args = append(args, "id", clip(reason))
	for _, id := range ids {
		if err := validID(id, false); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		args = append(args, id)
	}
	res, err := e.run(ctx, scriptCancel, args...)
	if err != nil {
		return nil, err
	}
	codes, err := replyCodes(e.relayMarked(res, len(ids)), len(ids))
	if err != nil {
		return nil, err
	}
	out := make([]CancelResult, len(ids))
	for i, c := range codes {
		if c == codeCancelled {
			out[i].Running = true
		} else {
			out[i].Err = codeError(c)
		}
	}
	return out, nil
}

// CancelLeased ends deliveries whose handlers were cancelled (Extend reported ErrCancelled) as
// cancelled, in one round trip: not retried, their outcome kept when they asked for that, an
// ordered partition released. It returns one error per receipt: nil, ErrStaleToken or
// ErrNotFound. It fails with the context's or Redis's error.
func (e *Engine) CancelLeased(ctx context.Context, rs []Receipt, reason string) ([]error, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	return inBatches(len(rs), func(lo, hi int) ([]error, error) {
		args := appendReceipts(slices.Grow([]any{"lease", clip(reason)}, 2*(hi-lo)), rs[lo:hi])
		return e.runCodes(ctx, scriptCancel, hi-lo, args)
	})
}
