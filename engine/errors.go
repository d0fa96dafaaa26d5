package engine

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrStaleToken is returned for a task whose fencing token is not the current lease's: the
	// lease expired and the task was returned or delivered again, or it was settled already.
	ErrStaleToken = errors.New("srq: stale fencing token: the task's lease is no longer held")
	// ErrNotFound is wrapped by the error for a task, flow, schedule or queue that does not exist;
	// the error names which.
	ErrNotFound = errors.New("srq: not found")
	// ErrNotDead is returned when requeueing a task that is not a dead letter.
	ErrNotDead = errors.New("srq: task is not a dead letter")
	// ErrInvalid is wrapped by every error about a bad argument or configuration.
	ErrInvalid = errors.New("srq: invalid argument")
	// ErrCancelled is the error Extend returns for a task that was asked to be cancelled (Cancel)
	// while leased: its holder cancels its handler, then settles it with CancelLeased.
	ErrCancelled = errors.New("srq: task cancelled")
	// ErrFinished is returned by Cancel for a task that has ended: a dead letter, or a task whose
	// outcome is kept (a task acked or cancelled whose outcome is not kept is not found).
	ErrFinished = errors.New("srq: task has finished")
	// ErrReplyLost is wrapped by the error of a call that was sent to Redis and whose reply did not
	// come back: the client's read timed out, the connection broke, or the context ended while the
	// reply was awaited. The call may have run or not; a script runs whole or not at all, so if it
	// ran, all of it did. srq never sends such a call again, and keeps go-redis from doing so
	// (scripts.go): run twice, a call would answer for its second run, as if its first had not
	// happened. Make the call again only when that is what you want, knowing it may repeat:
	// publish reports a repeated message as a duplicate, ack reports ErrNotFound, reject and kill
	// ErrStaleToken for a task the first run settled.
	ErrReplyLost = errors.New("srq: the reply was lost: the call was sent and may have run")
	// ErrTooManyPriorities is wrapped by the error of a Publish that would give a partition pending
	// tasks at more than MaxPriorityLevels priorities other than 0 (nothing of the batch is
	// written), and is the error of a Requeue item that would (the letter stays dead). It matches
	// ErrInvalid too.
	ErrTooManyPriorities error = tooManyPriorities{}
	// ErrQueueNotFound is wrapped by the error for a queue that is not registered (see
	// RegisterQueue) and has no keys. It matches ErrNotFound too.
	ErrQueueNotFound error = queueNotFound{}
)

type tooManyPriorities struct{}

func (tooManyPriorities) Error() string {
	return fmt.Sprintf("srq: a partition may have pending tasks at %d priorities other than 0 at most", MaxPriorityLevels)
}
func (tooManyPriorities) Is(target error) bool { return target == ErrInvalid }

type queueNotFound struct{}

func (queueNotFound) Error() string        { return "srq: queue not found" }
func (queueNotFound) Is(target error) bool { return target == ErrNotFound }

// Result codes the scripts return (lua/includes/common.lua).
const (
	codeOK        = 0
	codeStale     = 1
	codeNotFound  = 2
	codeDuplicate = 3
	codeNotDead   = 4
	codeDead      = 5
	codeConflict  = 6
	codeAborted   = 7
	codeCancelled = 8
	codeFinished  = 9
	codeLevels    = 10 // a publish or requeue would take the partition past MaxPriorityLevels
	codeRefused   = 11 // a task of a publish batch refused whole (codeLevels)
)

// codeErrors is the one table that turns script result codes into errors. Codes that mean success
// for the operation at hand (OK, DUPLICATE, DEAD) map to nil.
var codeErrors = map[int64]error{
	codeOK:        nil,
	codeStale:     ErrStaleToken,
	codeNotFound:  ErrNotFound,
	codeDuplicate: nil,
	codeNotDead:   ErrNotDead,
	codeDead:      nil,
	codeCancelled: ErrCancelled,
	codeFinished:  ErrFinished,
	codeLevels:    ErrTooManyPriorities,
}

func codeError(code int64) error {
	err, ok := codeErrors[code]
	if !ok {
		return fmt.Errorf("srq: unknown script result code %d", code)
	}
	return err
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// invalidIn returns err, a bad argument of what (`schedule "x"`), as an error that wraps
// ErrInvalid and err and says "srq: invalid argument" once, also when err wraps ErrInvalid itself.
func invalidIn(what string, err error) error {
	if !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
	}
	msg := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
	return &scopedError{msg: ErrInvalid.Error() + ": " + what + ": " + msg, err: err}
}

// scopedError is an error with a message of its own around err, which it wraps.
type scopedError struct {
	msg string
	err error
}

func (e *scopedError) Error() string { return e.msg }
func (e *scopedError) Unwrap() error { return e.err }
