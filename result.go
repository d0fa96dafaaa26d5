package srq

import (
	"context"
	"errors"
	"fmt"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

var (
	// ErrResultTooLarge is wrapped by the error for a result over QueueConfig.MaxResultBytes.
	ErrResultTooLarge = engine.ErrResultTooLarge
	// ErrNotEnded is returned by ResultOf for a task that has not ended yet: pending, leased, or
	// a flow step waiting for its parents.
	ErrNotEnded = errors.New("srq: the task has not ended")
)

// TaskFailedError is the error ResultOf, WaitResult and PublishAndWait return for a task that
// ended without succeeding: dead-lettered (State "dead"; a requeue may still run it) or
// cancelled (State "cancelled").
type TaskFailedError struct {
	ID     string
	State  string
	Reason string // the task's last error, or why it was cancelled
}

// Error says which task failed, how, and why.
func (e *TaskFailedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("srq: task %s is %s", e.ID, e.State)
	}
	return fmt.Sprintf("srq: task %s is %s: %s", e.ID, e.State, e.Reason)
}

// SetResult encodes v with the queue's codec and makes it the task's result: the ack that
// follows a nil from the handler stores it, when the task asks for its result to be kept (a flow
// step, PublishOpts.KeepResult or Wait) or the queue keeps results (QueueConfig.ResultRetention).
// Setting it again replaces it; a task that is not acked stores none. It fails with an error
// wrapping ErrResultTooLarge for a result over QueueConfig.MaxResultBytes, with the codec's error
// when v cannot be encoded, and with ErrInvalid on a Delivery a Worker did not make.
func (d *Delivery) SetResult(v any) error {
	if d == nil || d.codec == nil {
		return fmt.Errorf("%w: a Delivery not made by a Worker has no codec for its result", ErrInvalid)
	}
	b, err := d.codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("srq: task %s: encode the result with %s: %w", d.ID, d.codec.Name(), err)
	}
	if d.maxResult > 0 && len(b) > d.maxResult {
		return fmt.Errorf("%w: task %s: the result is %d bytes encoded, the limit is %d (MaxResultBytes)",
			ErrResultTooLarge, d.ID, len(b), d.maxResult)
	}
	d.result = b
	return nil
}

// Result returns the encoded result SetResult gave the task, nil for none: for middleware.
func (d *Delivery) Result() []byte { return d.result }

// ResultHandlerFunc adapts a function that returns a result to a Handler: a nil error acks the
// task with the result (Delivery.SetResult), which ResultOf, WaitResult and a flow's dependent
// steps (ParentResult) read. A result that cannot be encoded or is too large dead-letters the
// task (Permanent): running it again would not help.
type ResultHandlerFunc[T, R any] func(ctx context.Context, task *Task[T]) (R, error)

// Handle calls f and sets its result.
func (f ResultHandlerFunc[T, R]) Handle(ctx context.Context, task *Task[T]) error {
	r, err := f(ctx, task)
	if err != nil {
		return err
	}
	if err := task.SetResult(r); err != nil {
		return Permanent(err)
	}
	return nil
}

// ResultOf returns the result of task id of q, decoded with q's codec: a task that succeeded and
// whose outcome is kept (PublishOpts.KeepResult or Wait, QueueConfig.ResultRetention, a flow
// step), and gave a result (a nil result decodes to R's zero value). It fails with ErrNotEnded
// while the task has not ended; with a *TaskFailedError for a task dead-lettered or cancelled;
// with ErrNotFound when no such task exists and no outcome of it is kept; with the codec's error
// when the result does not decode into an R; with ErrInvalid for a nil or zero queue or an
// invalid id; and with the context's or Redis's error. On a sharded queue it asks every shard.
func ResultOf[R, T any](ctx context.Context, q *Queue[T], id string) (R, error) {
	var zero R
	if !q.made() {
		return zero, errNotMade
	}
	o, _, err := q.outcome(ctx, id)
	if err != nil {
		return zero, err
	}
	if !o.Done() {
		return zero, fmt.Errorf("%w: task %s is %s", ErrNotEnded, id, o.State)
	}
	return decodeOutcome[R](q, id, o)
}

// decodeOutcome returns the result of an outcome that ended, or the error of one that failed.
func decodeOutcome[R, T any](q *Queue[T], id string, o engine.Outcome) (R, error) {
	var r R
	if o.State != engine.StateSucceeded {
		return r, &TaskFailedError{ID: id, State: string(o.State), Reason: o.Error}
	}
	if o.Result == nil {
		return r, nil
	}
	if err := q.codec.Unmarshal(o.Result, &r); err != nil {
		return r, fmt.Errorf("srq: task %s: decode the result with %s: %w", id, q.codec.Name(), err)
	}
	return r, nil
}

// outcome reads task id's outcome from the shard that has it (every shard is asked, at once, on
// a sharded queue) and returns that shard's engine.
func (q *Queue[T]) outcome(ctx context.Context, id string) (engine.Outcome, *engine.Engine, error) {
	engs := q.shards.engines
	if len(engs) == 1 {
		o, err := engs[0].Outcome(ctx, id)
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w: task %s", ErrNotFound, id) // the engine's error names no task
		}
		return o, engs[0], err
	}
	type found struct {
		o   engine.Outcome
		eng *engine.Engine
		err error
	}
	ch := make(chan found, len(engs))
	for _, eng := range engs {
		go func() {
			o, err := eng.Outcome(ctx, id)
			ch <- found{o, eng, err}
		}()
	}
	var errs []error
	for range engs {
		f := <-ch
		if f.err == nil {
			return f.o, f.eng, nil
		}
		if !errors.Is(f.err, ErrNotFound) {
			errs = append(errs, f.err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return engine.Outcome{}, nil, err
	}
	return engine.Outcome{}, nil, fmt.Errorf("%w: task %s", ErrNotFound, id)
}

// WaitResult blocks until task id of q, published with PublishOpts.Wait, ends, and returns its
// result as ResultOf does. It waits in Redis, woken by the task's end, so a task that ended before
// the wait began returns at once. It fails with ctx's error when ctx ends first (the task is not
// affected), with a *TaskFailedError when the task is dead-lettered or cancelled, with ErrNotFound
// when no such task exists and no outcome of it is kept, and as ResultOf does otherwise.
func WaitResult[R, T any](ctx context.Context, q *Queue[T], id string) (R, error) {
	var zero R
	if !q.made() {
		return zero, errNotMade
	}
	_, eng, err := q.outcome(ctx, id)
	if err != nil {
		return zero, err
	}
	return waitOn[R](ctx, q, eng, id)
}

func waitOn[R, T any](ctx context.Context, q *Queue[T], eng *engine.Engine, id string) (R, error) {
	o, err := eng.WaitOutcome(ctx, id)
	if err != nil {
		var zero R
		return zero, err
	}
	return decodeOutcome[R](q, id, o)
}

// PublishAndWait publishes v to q (with PublishOpts.Wait set) and waits for the task to end, as
// WaitResult does: it returns the task's result, decoded into an R. It fails as Publish does
// (nothing waited for then, and a duplicate id fails with ErrDuplicate); when ctx ends before the
// task does, with ctx's error (the task goes on; wait again with WaitResult and its id, which
// opts.ID sets); with a *TaskFailedError when the task is dead-lettered or cancelled; and as
// WaitResult does otherwise.
func PublishAndWait[R, T any](ctx context.Context, q *Queue[T], v T, opts *PublishOpts) (R, error) {
	var zero R
	var o PublishOpts
	if opts != nil {
		o = *opts
	}
	o.Wait = true
	res, err := q.Publish(ctx, v, &o)
	if err != nil {
		return zero, err
	}
	if res.Duplicate {
		return zero, fmt.Errorf("%w: task %s", ErrDuplicate, res.ID)
	}
	key := partition.Key(o.Partition)
	if o.Ordered {
		key = partition.Ordered(o.Partition)
	}
	return waitOn[R](ctx, q, q.shards.of(key), res.ID)
}

// ErrDuplicate is returned by PublishAndWait when the id given exists already: the caller that
// published it may wait for it with WaitResult.
var ErrDuplicate = errors.New("srq: a task with this id exists already")
