package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Ack completes the deliveries in rs in one round trip: each task is deleted, and an ordered or
// limited partition whose last leased task it was is released. A task whose outcome is kept (see
// Receipt.Result) leaves it, and a flow step releases the steps waiting for it. It returns one
// error per receipt: nil, ErrStaleToken (the lease is no longer this delivery's; nothing changed)
// or ErrNotFound. It fails with ErrResultTooLarge for a result over MaxResultBytes, before
// anything is sent, and with the context's or Redis's error, after which the acks may or may not
// have happened.
func (e *Engine) Ack(ctx context.Context, rs []Receipt) ([]error, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := e.checkResults(rs); err != nil {
		return nil, err
	}
	return inBatches(len(rs), func(lo, hi int) ([]error, error) {
		o := &op{acks: rs[lo:hi]}
		if err := e.calls.do(ctx, o); err != nil {
			return nil, err
		}
		return o.errs, o.err
	})
}

// inBatches runs call on the items [lo, hi) of n, at most MaxBatch at a time, one after the
// other, and joins the per-item errors. It stops at the first call that fails: the items before
// it are settled, the rest not sent.
func inBatches(n int, call func(lo, hi int) ([]error, error)) ([]error, error) {
	if n <= MaxBatch {
		return call(0, n)
	}
	out := make([]error, 0, n)
	for lo := 0; lo < n; lo += MaxBatch {
		errs, err := call(lo, min(lo+MaxBatch, n))
		if err != nil {
			return nil, err
		}
		out = append(out, errs...)
	}
	return out, nil
}

// appendReceipts appends the script arguments of rs to args: id and token of each.
func appendReceipts(args []any, rs []Receipt) []any {
	args = slices.Grow(args, 2*len(rs))
	for _, r := range rs {
		args = append(args, r.ID, r.Token.String())
	}
	return args
}

// appendAcks appends the ack script arguments of rs to args: id, token and result of each.
func appendAcks(args []any, rs []Receipt) []any {
	args = slices.Grow(args, 3*len(rs))
	for _, r := range rs {
		args = append(args, r.ID, r.Token.String(), r.Result)
	}
	return args
}

// Rejection returns one delivery to pending.
type Rejection struct {
	Receipt
	// Delay is how long the task (unordered) or its whole partition (ordered) waits. Not negative.
	Delay time.Duration
	// Reason is kept as the task's last error; at most MaxReasonLen bytes are kept.
	Reason string
	// NotAttempt makes this delivery not count as an attempt, as for a rate limit.
	NotAttempt bool
	// HandBack marks a task its worker returns without having run it, or whose handler the
	// worker's shutdown cut off: it does not count as an attempt (whatever NotAttempt says), is
	// counted in Stats.HandedBack instead of Stats.Rejected (with the later tasks of its ordered run
	// that it takes back, instead of Stats.TakenBack), and its event is EventHandedBack, not
	// EventRetried.
	HandBack bool
	// Wait, when set, makes the rejection a wait (no attempt counted, no reason kept): a sleep of
	// Delay, a wait for a signal (for at most Delay when it is not 0) or for the task's children.
	Wait *Wait
}

// RejectResult tells what Reject did with one delivery.
type RejectResult struct {
	// DeadLettered is true when the task had used its attempts and went to the dead letters.
	DeadLettered bool
	// Err is nil, ErrStaleToken or ErrNotFound.
	Err error
}

// Reject returns deliveries to pending in one round trip. An unordered task comes back at
// now+Delay; an ordered task keeps its exact place at the head of its partition, and the partition
// is blocked until now+Delay. Rejecting an ordered task also takes back every task of its
// partition leased with it that comes later in the partition's order, to their own places and
// without counting an attempt, so none of them can complete first; their fencing tokens go stale.
// A task that has used its max attempts goes to the dead letters instead (and then the later tasks
// stay leased). A task asked to be cancelled while leased (Cancel), rejected or taken back, ends
// cancelled instead: a cancel that Cancel acknowledged is not undone by a retry or a hand-back. It
// fails with ErrInvalid for a delay outside [0, MaxDelay], before anything is sent, and with the
// context's or Redis's error.
func (e *Engine) Reject(ctx context.Context, rs []Rejection) ([]RejectResult, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if len(rs) > MaxBatch {
		return nil, invalidf("a reject of %d tasks is over the limit of %d (MaxBatch)", len(rs), MaxBatch)
	}
	count, age := e.deadCaps()
	args := make([]any, 0, 2+7*len(rs))
	args = append(args, count, age)
	for i, r := range rs {
		if r.Delay < 0 || r.Delay > MaxDelay {
			return nil, invalidf("rejection %d: delay %v is outside [0, %v]", i, r.Delay, MaxDelay)
		}
		if r.Wait != nil {
			if err := r.Wait.valid(); err != nil {
				return nil, fmt.Errorf("%w: rejection %d: %w", ErrInvalid, i, err)
			}
			if n := len(r.Wait.State); n > e.cfg.MaxResultBytes {
				return nil, fmt.Errorf("%w: task %s: the state is %d bytes, the limit is %d (MaxResultBytes)",
					ErrResultTooLarge, r.ID, n, e.cfg.MaxResultBytes)
			}
		}
		counts := 1 // lua/reject.lua: 1 an attempt, 0 none, 2 a hand-back
		switch {
		case r.HandBack:
			counts = 2
		case r.NotAttempt:
			counts = 0
		}
		args = append(args, r.ID, r.Token.String(), r.Delay.Milliseconds(), clip(r.Reason), counts)
		args = waitArgs(args, &rs[i])
	}
	res, err := e.run(ctx, scriptReject, args...)
	if err != nil {
		return nil, err
	}
	codes, err := replyCodes(e.relayMarked(res, len(rs)), len(rs))
	if err != nil {
		return nil, err
	}
	out := make([]RejectResult, len(rs))
	for i, c := range codes {
		out[i] = RejectResult{DeadLettered: c == codeDead, Err: codeError(c)}
	}
	return out, nil
}

// Extend moves the lease deadline of the deliveries in rs to now+lease (server time) in one round
// trip. It returns one error per receipt (nil, ErrStaleToken or ErrNotFound) and the new deadline
// on this machine's clock, never later than the server's. It fails with ErrInvalid for a lease
// under a millisecond, and with the context's or Redis's error.
func (e *Engine) Extend(ctx context.Context, rs []Receipt, lease time.Duration) ([]error, time.Time, error) {
	if lease < time.Millisecond {
		return nil, time.Time{}, invalidf("lease %v is below 1ms", lease)
	}
	if len(rs) == 0 {
		return nil, time.Time{}, nil
	}
	sent := time.Now()
	errs, err := inBatches(len(rs), func(lo, hi int) ([]error, error) {
		res, err := e.run(ctx, scriptExtend, appendReceipts([]any{lease.Milliseconds()}, rs[lo:hi])...)
		if err != nil {
			return nil, err
		}
		rows, err := replySlice(res)
		if err != nil || len(rows) < 1 {
			return nil, fmt.Errorf("srq: extend: malformed reply %v", res)
		}
		codes, err := replyCodes(rows[1:], hi-lo)
		if err != nil {
			return nil, err
		}
		return codesToErrors(codes), nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return errs, localDeadline(sent, lease), nil
}

// Failure moves one delivery to the dead letters at once.
type Failure struct {
	Receipt
	// Reason is kept as the task's last error; at most MaxReasonLen bytes are kept.
	Reason string
}

// Kill moves deliveries to the dead letters now, whatever their attempts, in one round trip; a
// task asked to be cancelled while leased (Cancel) ends cancelled instead, and so holds no
// partition. It returns one error per delivery: nil, ErrStaleToken or ErrNotFound. It fails with the context's
// or Redis's error, after which the tasks may or may not have been moved.
func (e *Engine) Kill(ctx context.Context, fs []Failure) ([]error, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	count, age := e.deadCaps()
	return inBatches(len(fs), func(lo, hi int) ([]error, error) {
		args := make([]any, 0, 2+3*(hi-lo))
		args = append(args, count, age)
		for _, f := range fs[lo:hi] {
			args = append(args, f.ID, f.Token.String(), clip(f.Reason))
		}
		return e.runCodes(ctx, scriptKill, hi-lo, args)
	})
}

func (e *Engine) runCodes(ctx context.Context, s *script, n int, args []any) ([]error, error) {
	res, err := e.run(ctx, s, args...)
	if err != nil {
		return nil, err
	}
	codes, err := replyCodes(e.relayMarked(res, n), n)
	if err != nil {
		return nil, err
	}
	return codesToErrors(codes), nil
}

// clip cuts reason to at most MaxReasonLen bytes, at a character boundary.
func clip(reason string) string {
	if len(reason) <= MaxReasonLen {
		return reason
	}
	cut := MaxReasonLen
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}

// localDeadline is the deadline on this machine's clock of a lease of lease granted by a call sent
// at sent: the server sets its own at its clock in whole milliseconds (up to 1 ms before the
// call arrived) plus lease in whole milliseconds, so this is never later than the server's. Add
// keeps sent's monotonic reading.
func localDeadline(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease.Truncate(time.Millisecond) - time.Millisecond)
}
