package srq

import (
	"errors"
	"fmt"
	"time"

	"github.com/srqueue/srq/engine"
)

var (
	// ErrStaleToken is returned when a task's lease is no longer this delivery's: it expired and the
	// task was returned or delivered again. A handler whose context ends with this cause has lost
	// its lease: another consumer may be running the task.
	ErrStaleToken = engine.ErrStaleToken
	// ErrNotFound is wrapped by the error for a task, flow, schedule or queue that does not exist;
	// the error names which.
	ErrNotFound = engine.ErrNotFound
	// ErrNotDead is returned when requeueing a task that is not a dead letter.
	ErrNotDead = engine.ErrNotDead
	// ErrInvalid is wrapped by every error about a bad argument or configuration.
	ErrInvalid = engine.ErrInvalid
	// ErrLeaseLost is the cause of a handler's context ending because the task's lease ended: it
	// could not be extended in time, or another delivery of the task took over.
	ErrLeaseLost = errors.New("srq: the task's lease was lost")
	// ErrShutdown is the cause of a handler's context ending because the worker shut down and the
	// handler did not finish within the shutdown timeout. The task is handed back, not counted as
	// an attempt, whatever error the handler returns then, except a Permanent one, which
	// dead-letters the task as usual; a handler that returns nil then has its task acked.
	ErrShutdown = errors.New("srq: worker shut down")
	// ErrReplyLost is wrapped by the error of a call whose reply was lost (a read timeout, a
	// broken connection): it was sent and may have run, whole or not at all. srq never sends a
	// call of yours again, nor lets go-redis do so, since a second run would answer for itself as
	// if the first had not happened; publish again with the same ids to find out (duplicates are
	// reported). A worker sends its own acks, rejects, kills and hand-backs again while it holds
	// their tasks, and takes a repeat refused as settled (docs/worker.md).
	ErrReplyLost = engine.ErrReplyLost
	// ErrTooManyPriorities is wrapped by the error of a publish that would give a partition
	// pending tasks at more than MaxPriorityLevels priorities other than 0: nothing of the batch
	// is written (on a sharded queue, each shard checks its own part, and the parts of other
	// shards may have been written). It matches ErrInvalid too.
	ErrTooManyPriorities = engine.ErrTooManyPriorities
	// ErrRunning is returned by Worker.Run and RunOnce when the worker is running already: a
	// Worker runs one Run or RunOnce at a time.
	ErrRunning = errors.New("srq: worker is already running")
)

// MaxPriorityLevels is the most priorities other than 0 a partition may have tasks pending at: a
// bound on the work of every call that touches the partition.
const MaxPriorityLevels = engine.MaxPriorityLevels

// The errors of a Queue or Worker used without its constructor: the zero values have no engines
// to talk to, and fail instead of panicking on a nil field.
var (
	errNotMade       = fmt.Errorf("%w: a Queue not made by NewQueue", ErrInvalid)
	errWorkerNotMade = fmt.Errorf("%w: a Worker not made by NewWorker", ErrInvalid)
)

// RejectError is a handler error that returns the task to its queue: an unordered task becomes
// available again after Delay; an ordered task keeps its place and its whole partition waits
// Delay. Build it with Reject, RejectWithDelay or Snooze.
type RejectError struct {
	// Delay is how long the task (an ordered one's whole partition) waits before it is available
	// again; 0: at once.
	Delay time.Duration
	// Err is the handler's reason, kept as the task's last error; nil for a plain Snooze.
	Err error
	// NotAttempt makes this delivery not count as an attempt (Snooze).
	NotAttempt bool
}

// Reject returns an error that hands the task back to be tried again now. It counts as an attempt.
func Reject(err error) error { return &RejectError{Err: err} }

// RejectWithDelay returns an error that hands the task back to be tried again after d; for an
// ordered partition the whole partition waits d, which makes it a per-partition rate limit. It
// counts as an attempt. A negative d is taken as 0.
func RejectWithDelay(d time.Duration, err error) error {
	return &RejectError{Delay: max(d, 0), Err: err}
}

// Snooze returns an error that hands the task back for d without counting this delivery as an
// attempt: for waits that are not failures, such as a rate limit. An ordered partition waits d.
// A negative d is taken as 0.
func Snooze(d time.Duration) error {
	return &RejectError{Delay: max(d, 0), NotAttempt: true}
}

// Error says that the task was rejected or snoozed, for how long, and why.
func (e *RejectError) Error() string {
	if e.NotAttempt && e.Err == nil {
		return fmt.Sprintf("srq: snoozed for %v", e.Delay)
	}
	if e.Err == nil {
		return fmt.Sprintf("srq: rejected, retry after %v", e.Delay)
	}
	return fmt.Sprintf("srq: rejected, retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns the handler's reason, so errors.Is and errors.As see through the rejection.
func (e *RejectError) Unwrap() error { return e.Err }

// PermanentError is a handler error that sends the task to the dead letters at once, whatever
// attempts it has left. Build it with Permanent.
type PermanentError struct {
	// Err is the handler's reason, kept as the dead letter's error.
	Err error
}

// Permanent returns an error that dead-letters the task now: retrying cannot help.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Error says that the task failed for good, and why.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "srq: permanent failure"
	}
	return "srq: permanent failure: " + e.Err.Error()
}

// Unwrap returns the handler's reason.
func (e *PermanentError) Unwrap() error { return e.Err }

// PanicError is what a handler's panic becomes: the panic value and the goroutine's stack. It is
// handled like any other error (retried under the retry policy).
type PanicError struct {
	Value any
	Stack []byte
}

// Error says that the handler panicked, with the panic value (the stack is in Stack).
func (e *PanicError) Error() string { return fmt.Sprintf("srq: handler panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
