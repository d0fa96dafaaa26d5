package engine

import (
	"errors"
	"fmt"
)

var (
	// ErrStaleToken is returned for a task whose fencing token is not the current lease's: the
	// lease expired and the task was returned or delivered again, or it was settled already.
	ErrStaleToken = errors.New("srq: stale fencing token: the task's lease is no longer held")
	// ErrNotFound is returned for a task id that does not exist.
	ErrNotFound = errors.New("srq: task not found")
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
	// ErrQueueNotFound is wrapped by the error for a queue that is not registered (see
	// RegisterQueue) and has no keys. It matches ErrNotFound too.
	ErrQueueNotFound error = queueNotFound{}
)

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
