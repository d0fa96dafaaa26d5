package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrResultTooLarge is wrapped by the error for a result over Config.MaxResultBytes.
var ErrResultTooLarge = errors.New("srq: result too large")

// The states of a task's Outcome besides those of TaskInfo.
const (
	// StateSucceeded is a task that was acked.
	StateSucceeded State = "succeeded"
	// StateCancelled is a task that was cancelled, or a flow step cancelled because a parent it
	// needs failed (while that parent is a dead letter, a requeue of it reopens the step).
	StateCancelled State = "cancelled"
	// StateWaiting is a flow step that waits for its parents.
	StateWaiting State = "waiting"
)

var outcomeStates = map[string]State{
	"ok": StateSucceeded, "dead": StateDead, "cancelled": StateCancelled,
	"pending": StatePending, "leased": StateLeased, "waiting": StateWaiting,
}

// Outcome is what became of a task: how it ended (succeeded, dead-lettered or cancelled), with
// its result or error, or the state it is in while it has not ended.
type Outcome struct {
	State State
	// Ended is when the task ended; zero while it has not (a dead letter whose outcome is not
	// kept has none either).
	Ended time.Time
	// Result is what the handler of a succeeded task returned (Receipt.Result); nil for none.
	Result []byte
	// ResultLen is the length of the result.
	ResultLen int
	// Error is why a task was dead-lettered or cancelled.
	Error string
}

// Done reports whether the task has ended: it succeeded, is a dead letter, or was cancelled. A
// dead letter may still be requeued and run; so may a flow step cancelled because a parent it
// needs is a dead letter (its Ended is zero then): a requeue of that parent reopens it.
func (o Outcome) Done() bool {
	return o.State == StateSucceeded || o.State == StateDead || o.State == StateCancelled
}

// checkResults fails with ErrResultTooLarge when a receipt carries a result over the limit.
func (e *Engine) checkResults(rs []Receipt) error {
	for i := range rs {
		if n := len(rs[i].Result); n > e.cfg.MaxResultBytes {
			return fmt.Errorf("%w: task %s: the result is %d bytes, the limit is %d (MaxResultBytes)",
				ErrResultTooLarge, rs[i].ID, n, e.cfg.MaxResultBytes)
		}
	}
	return nil
}

// Outcome returns what became of task id: its outcome when it ended and the outcome is kept (a
// flow step, a task published to be waited for, or under Config.ResultRetention), a dead
// letter's error, or the state it is in. It fails with ErrNotFound when the task does not exist
// and no outcome of it is kept, with ErrInvalid for an invalid id, and with the context's or
// Redis's error.
func (e *Engine) Outcome(ctx context.Context, id string) (Outcome, error) {
	os, errs, err := e.outcomes(ctx, []string{id}, false)
	if err != nil {
		return Outcome{}, err
	}
	return os[0], errs[0]
}

// outcomes reads the outcomes of ids in one call, with each one's error (nil or ErrNotFound);
// sizes returns a result's length in Result's place (its bytes unset, its length in ResultLen).
func (e *Engine) outcomes(ctx context.Context, ids []string, sizes bool) ([]Outcome, []error, error) {
	args := make([]any, 0, 1+len(ids))
	args = append(args, sizes)
	for _, id := range ids {
		if err := validID(id, false); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		args = append(args, id)
	}
	res, err := e.run(ctx, scriptOutcome, args...)
	if err != nil {
		return nil, nil, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) != len(ids) {
		return nil, nil, fmt.Errorf("srq: outcome: malformed reply %v", res)
	}
	os, errs := make([]Outcome, len(ids)), make([]error, len(ids))
	for i, row := range rows {
		if code, ok := row.(int64); ok {
			errs[i] = codeError(code)
			continue
		}
		if os[i], err = parseOutcome(row, sizes); err != nil {
			return nil, nil, err
		}
	}
	return os, errs, nil
}

// parseOutcome reads one of outcome.lua's rows.
func parseOutcome(res any, sizes bool) (Outcome, error) {
	rows, err := replySlice(res)
	if err != nil || len(rows) != 4 {
		return Outcome{}, fmt.Errorf("srq: outcome: malformed reply %v", res)
	}
	state, err1 := replyString(rows[0])
	ended, err2 := replyInt(rows[1])
	why, err4 := replyString(rows[3])
	var result string
	var size int64
	var err3 error
	if sizes {
		size, err3 = replyInt(rows[2])
	} else {
		result, err3 = replyString(rows[2])
		size = int64(len(result))
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Outcome{}, fmt.Errorf("srq: outcome: malformed reply %v: %w", res, err)
	}
	o := Outcome{State: outcomeStates[state], Error: why, ResultLen: int(size)}
	if o.State == "" {
		return Outcome{}, fmt.Errorf("srq: outcome: unknown state %q", state)
	}
	if ended > 0 {
		o.Ended = time.UnixMilli(ended)
	}
	if result != "" {
		o.Result = []byte(result)
	}
	return o, nil
}

// WaitOutcome blocks until task id, published to be waited for (Message.Wait), ends, and returns
// its outcome: succeeded with its result, dead-lettered or cancelled with the error. It waits in
// Redis, woken by the task's end, so it returns at once when the task ended before the wait
// began. It fails with ctx's error when ctx ends first, with ErrNotFound when the task does not
// exist and no outcome of it is kept (never published, or its outcome is past its retention), and
// with Redis's error.
func (e *Engine) WaitOutcome(ctx context.Context, id string) (Outcome, error) {
	if err := validID(id, false); err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	key := e.keys.Waiter(id)
	for {
		o, err := e.Outcome(ctx, id)
		if err != nil || o.Done() {
			return o, err
		}
		block := e.cfg.MaxBlock
		if d, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(d))
		}
		if block <= 0 {
			return Outcome{}, context.DeadlineExceeded
		}
		if _, err := e.blockPop(ctx, key, block); err != nil {
			if ctx.Err() != nil {
				return Outcome{}, ctx.Err()
			}
			return Outcome{}, fmt.Errorf("srq: wait for task %s: %w", id, err)
		}
	}
}
