package srq

import "context"

// Handler processes tasks whose payload is a T. Its error decides what happens to the task:
//   - nil: the task is acked (done, deleted);
//   - Reject or RejectWithDelay: the task goes back (an ordered partition keeps its order);
//   - Permanent: the task goes to the dead letters now;
//   - any other error: the worker's retry policy gives a delay and the task goes back, until it has
//     used its max attempts; then it goes to the dead letters with the error.
//
// A task is delivered at least once: handlers must be idempotent. The context ends when the task's
// lease is lost (cause ErrLeaseLost) or the worker stops waiting for it (cause ErrShutdown).
type Handler[T any] interface {
	Handle(ctx context.Context, task *Task[T]) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc[T any] func(ctx context.Context, task *Task[T]) error

// Handle calls f.
func (f HandlerFunc[T]) Handle(ctx context.Context, task *Task[T]) error { return f(ctx, task) }

// WorkFunc processes one delivery; it is what middleware wraps.
type WorkFunc func(ctx context.Context, d *Delivery) error

// Middleware wraps a WorkFunc, for every payload type. The first middleware in a list is the
// outermost.
type Middleware func(next WorkFunc) WorkFunc
