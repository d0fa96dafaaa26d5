package engine

import (
	"context"
	"errors"
	"fmt"
)

var scriptRunNow = mustScript("run_now")

// ErrNotPending is the error of RunNow for a task that exists but is not pending: leased, a dead
// letter, a flow step waiting for its parents, or ended with its outcome kept.
var ErrNotPending = errors.New("srq: task is not pending")

// RunNow makes pending tasks available now, in one round trip: a delayed task (published with a
// delay or an At, or sent back with a delay) gets available-at now, after the tasks of its
// priority available already, and its partition is placed so that a fetch can take it at once.
// In an ordered partition blocked by a delayed reject the block is lifted, so the partition goes
// on from its head; a paused or held partition stays so. A task available already is left as it
// is. It returns one error per id: nil, ErrNotFound (no such task) or ErrNotPending. It fails with
// ErrInvalid for an invalid id or more than MaxBatch ids, and with the context's or Redis's error.
func (e *Engine) RunNow(ctx context.Context, ids []string) ([]error, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxBatch {
		return nil, invalidf("a run-now of %d tasks is over the limit of %d (MaxBatch)", len(ids), MaxBatch)
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		if err := validID(id, false); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		args[i] = id
	}
	res, err := e.run(ctx, scriptRunNow, args...)
	if err != nil {
		return nil, err
	}
	codes, err := replyCodes(res, len(ids))
	if err != nil {
		return nil, err
	}
	out := make([]error, len(ids))
	for i, c := range codes {
		switch c {
		case codeOK:
		case codeNotFound:
			out[i] = ErrNotFound
		case codeConflict:
			out[i] = ErrNotPending
		default:
			out[i] = codeError(c)
		}
	}
	return out, nil
}
