package srq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/srqueue/srq/engine"
)

// SpawnOpts are the options of a child task (Spawn).
type SpawnOpts struct {
	// Publish are the child's options as for Publish: partition, priority, delay, attempts,
	// headers. ID must be empty (a child's id is its parent's id and its name) and Wait unset (its
	// parent reads its outcome). KeepResult is how long its outcome is kept after it ended, for
	// its parent to read: 7 days when 0.
	Publish PublishOpts
	// Policy says what the child's failure (it is dead-lettered or cancelled) does to its parent
	// when the parent waits for its children (WaitChildren): FailDependents, the default, ends the
	// wait at once, and the parent runs again (ChildResults reports the failure);
	// ContinueDependents and IgnoreFailure let the wait go on until every child ended.
	Policy FailurePolicy
}

// Spawned is one child of SpawnBatch: its name within its parent, its value and its options.
type Spawned[C any] struct {
	Name  string
	Value C
	Opts  *SpawnOpts
}

// Spawn publishes v to q as a child of the task d delivers: a task of any queue and payload type,
// tied to its parent. Its id is "<parent id>/<name>", so a parent that runs again (a retry, a crash,
// after a wait) and spawns the same name creates nothing twice: the second spawn is a duplicate
// (PublishResult.Duplicate), also once the child has ended and while its outcome is kept. A parent
// that returns WaitChildren runs again when every child it spawned has ended (or one failed, see
// SpawnOpts.Policy) and reads their results with ChildResults or ChildResult. The child's publish
// goes through q's PublishMiddleware (a tracing middleware makes it part of the parent's trace).
// It fails with ErrInvalid for a name over MaxStepNameLen bytes, empty or holding '/', for options
// with an ID or Wait, and for a Delivery a Worker did not make; with ErrNotFound when the parent
// no longer exists; and as Publish does.
func Spawn[C any](ctx context.Context, d *Delivery, q *Queue[C], name string, v C, opts *SpawnOpts) (PublishResult, error) {
	res, err := SpawnBatch(ctx, d, q, []Spawned[C]{{Name: name, Value: v, Opts: opts}})
	if err != nil {
		return PublishResult{}, err
	}
	return res[0], nil
}

// SpawnBatch spawns children to q as Spawn does, in one round trip per shard of q they go to (and
// one more when their parent lives in another queue or shard), and reports per child what
// happened. It fails as Spawn does, and with ErrInvalid for two children of one name; nothing is
// written then.
func SpawnBatch[C any](ctx context.Context, d *Delivery, q *Queue[C], children []Spawned[C]) ([]PublishResult, error) {
	if !q.made() {
		return nil, errNotMade
	}
	if d == nil || d.eng == nil {
		return nil, fmt.Errorf("%w: a Delivery not made by a Worker has no parent task to spawn from", ErrInvalid)
	}
	msgs := make([]Message[C], len(children))
	names := make(map[string]bool, len(children))
	for i, c := range children {
		if names[c.Name] {
			return nil, fmt.Errorf("%w: child %d: the name %q is spawned twice", ErrInvalid, i, c.Name)
		}
		names[c.Name] = true
		if c.Opts != nil {
			if c.Opts.Publish.ID != "" || c.Opts.Publish.Wait {
				return nil, fmt.Errorf("%w: child %q: PublishOpts.ID or Wait is set; a child's id is its parent's and its name, and its parent reads its outcome", ErrInvalid, c.Name)
			}
			msgs[i].Opts = c.Opts.Publish
		}
		msgs[i].Value = c.Value
	}
	ems, err := q.messages(msgs)
	if err != nil {
		return nil, err
	}
	for i, c := range children {
		var policy FailurePolicy
		if c.Opts != nil {
			policy = c.Opts.Policy
		}
		if ems[i], err = engine.ChildOf(ems[i], d.eng, d.ID, c.Name, policy); err != nil {
			return nil, err
		}
	}
	res, err := q.publish(ctx, &Publishing{Queue: q.name, Messages: ems})
	if err == nil && len(res) != len(children) {
		return nil, fmt.Errorf("srq: publish returned %d results for %d children (a PublishMiddleware?)", len(res), len(children))
	}
	return res, err
}

// ErrSignalTimeout is the error SignalValue returns when the wait for the signal ended because
// its time ran out (WaitSignal's timeout) before the signal came.
var ErrSignalTimeout = errors.New("srq: the wait for the signal timed out")

// WaitError is the error a handler returns to wait without holding its lease or a worker slot: for
// its children (WaitChildren), a signal (WaitSignal) or a time (Sleep). The delivery ends without
// using an attempt, the task keeps its place (an ordered partition waits behind it, in order), and
// it runs again, as a new delivery of the same handler, when what it waits for comes; the state it
// set (SetState) is there (State). Make one with those functions.
type WaitError struct {
	kind    engine.WaitKind
	signal  string
	timeout time.Duration
	state   []byte // what the handler set (SetState), added by the worker
}

// Error says what the task waits for.
func (e *WaitError) Error() string {
	switch e.kind {
	case engine.WaitChildren:
		return "srq: waiting for its children"
	case engine.WaitSignal:
		if e.timeout > 0 {
			return fmt.Sprintf("srq: waiting for signal %q, at most %v", e.signal, e.timeout)
		}
		return fmt.Sprintf("srq: waiting for signal %q", e.signal)
	}
	return fmt.Sprintf("srq: sleeping %v", e.timeout)
}

// WaitChildren returns the error with which a handler waits, holding no lease and no slot, until
// every child it spawned has ended (succeeded, dead-lettered or cancelled), or one spawned with
// the FailDependents policy failed; the task then runs again and reads them (ChildResults). A task
// whose children have all ended already, or that spawned none, runs again at once. A task waiting
// for its children is "waiting"; cancelling it (Queue.Cancel) cancels the children that have not
// ended.
func WaitChildren() error { return &WaitError{kind: engine.WaitChildren} }

// Sleep returns the error with which a handler waits d, holding no lease and no slot, then runs
// again; no attempt is used. A negative d is taken as 0. An ordered partition waits with it.
func Sleep(d time.Duration) error {
	return &WaitError{kind: engine.WaitSleep, timeout: min(max(d, 0), engine.MaxDelay)}
}

// WaitSignal returns the error with which a handler waits, holding no lease and no slot, for the
// signal name (Queue.Signal), for at most timeout (0 or negative: no limit); the task then runs again and
// reads it with SignalValue, which reports ErrSignalTimeout when the time ran out first. A signal
// sent before the wait is kept, and ends the wait at once. The name must be 1 to 128 bytes of
// UTF-8 without NUL: another fails the task's settling with ErrInvalid, and the task comes back
// when its lease expires.
func WaitSignal(name string, timeout time.Duration) error {
	return &WaitError{kind: engine.WaitSignal, signal: name, timeout: min(max(timeout, 0), engine.MaxDelay)}
}

// SetState encodes v with the queue's codec and keeps it with the task when its handler returns a
// wait (WaitError), for its next run to read with State: where a workflow stands. Setting it again
// replaces it; a handler that returns anything but a wait keeps none. It fails with an error
// wrapping ErrResultTooLarge for a state over QueueConfig.MaxResultBytes, with the codec's error,
// and with ErrInvalid on a Delivery a Worker did not make.
func (d *Delivery) SetState(v any) error {
	if d == nil || d.codec == nil {
		return fmt.Errorf("%w: a Delivery not made by a Worker has no codec for its state", ErrInvalid)
	}
	b, err := d.codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("srq: task %s: encode the state with %s: %w", d.ID, d.codec.Name(), err)
	}
	if d.maxResult > 0 && len(b) > d.maxResult {
		return fmt.Errorf("%w: task %s: the state is %d bytes encoded, the limit is %d (MaxResultBytes)",
			ErrResultTooLarge, d.ID, len(b), d.maxResult)
	}
	d.state, d.stateSet = b, true
	return nil
}

// workflow returns what the task kept from its last runs, read once per delivery.
func (d *Delivery) workflow(ctx context.Context) (*engine.Workflow, error) {
	if d == nil || d.eng == nil {
		return nil, fmt.Errorf("%w: a Delivery not made by a Worker has no task to read", ErrInvalid)
	}
	if d.wf == nil {
		wf, err := d.eng.WorkflowOf(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		d.wf = &wf
	}
	return d.wf, nil
}

// State returns the state the task set (SetState) before its last wait, decoded into an S with
// the queue's codec, and whether there was one (false on a task's first run). It reads Redis once
// per delivery. It fails with the codec's error when the state does not decode into an S, with
// ErrNotFound when the task is gone, with ErrInvalid on a Delivery a Worker did not make, and with
// the context's or Redis's error.
func State[S any](ctx context.Context, d *Delivery) (S, bool, error) {
	var s S
	wf, err := d.workflow(ctx)
	if err != nil || wf.State == nil {
		return s, false, err
	}
	if err := d.codec.Unmarshal(wf.State, &s); err != nil {
		return s, false, fmt.Errorf("srq: task %s: decode the state with %s: %w", d.ID, d.codec.Name(), err)
	}
	return s, true, nil
}

// SignalValue returns the value of signal name that ended the task's last wait, decoded into a V
// with the queue's codec. It fails with ErrSignalTimeout when that wait was for the signal and its
// time ran out first, with ErrNotFound when no signal of that name ended the task's last wait, with
// the codec's error when the value does not decode into a V, with ErrInvalid on a Delivery a Worker
// did not make, and with the context's or Redis's error.
func SignalValue[V any](ctx context.Context, d *Delivery, name string) (V, error) {
	var v V
	wf, err := d.workflow(ctx)
	if err != nil {
		return v, err
	}
	switch {
	case wf.Signal == name:
		if err := d.codec.Unmarshal(wf.SignalValue, &v); err != nil {
			return v, fmt.Errorf("srq: task %s: decode signal %q with %s: %w", d.ID, name, d.codec.Name(), err)
		}
		return v, nil
	case wf.Waited == engine.WaitSignal && wf.WaitedSignal == name:
		return v, fmt.Errorf("%w: task %s, signal %q", ErrSignalTimeout, d.ID, name)
	}
	return v, fmt.Errorf("%w: no signal %q ended the last wait of task %s", ErrNotFound, name, d.ID)
}

// Child is one child a task spawned, as its parent sees it (Delivery.Children).
type Child struct {
	Name  string
	ID    string
	Queue string
	// State is "succeeded", "dead" (failed), "cancelled", or "pending" while it has not ended.
	State  string
	Policy FailurePolicy
}

// Children returns the children the task spawned, sorted by name, with what became of each. It
// fails with ErrInvalid on a Delivery a Worker did not make, and with the context's or Redis's error.
func (d *Delivery) Children(ctx context.Context) ([]Child, error) {
	if d == nil || d.eng == nil {
		return nil, fmt.Errorf("%w: a Delivery not made by a Worker has no children", ErrInvalid)
	}
	cs, err := d.eng.Children(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Child, len(cs))
	for i, c := range cs {
		out[i] = Child{Name: c.Name, ID: c.ID, Queue: c.Queue, State: string(c.State), Policy: c.Policy}
	}
	return out, nil
}

// ChildResult returns the result of child name of the task d delivers, decoded into an R with the
// codec of d's queue (as ParentResult does). It fails with ErrNotFound when the task spawned no
// child of that name or the child's outcome is no longer kept; with ErrNotEnded while the child has
// not ended; with a *TaskFailedError when it failed or was cancelled; with the codec's error when
// the result does not decode into an R; and with the context's or Redis's error.
func ChildResult[R any](ctx context.Context, d *Delivery, name string) (R, error) {
	var r R
	cs, err := d.childrenNamed(ctx, name)
	if err != nil {
		return r, err
	}
	rs, err := childResults[R](ctx, d, cs)
	if err != nil {
		return r, err
	}
	return rs[0].value, rs[0].err
}

// ChildResults returns the results of every child of the task d delivers that succeeded, by name,
// decoded into Rs with the codec of d's queue, and the error of every other: an errors.Join of a
// *TaskFailedError per child that failed or was cancelled, one wrapping ErrNotEnded per child
// still running (a parent that waited with the ContinueDependents policy sees only ended ones), and
// one wrapping ErrNotFound per child whose outcome is no longer kept (past its KeepResult).
// It fails with ErrInvalid on a Delivery a Worker did not make, and with the context's or Redis's
// error, without results.
func ChildResults[R any](ctx context.Context, d *Delivery) (map[string]R, error) {
	cs, err := d.childrenNamed(ctx, "")
	if err != nil {
		return nil, err
	}
	rs, err := childResults[R](ctx, d, cs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]R, len(rs))
	var errs []error
	for i, r := range rs {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		out[cs[i].Name] = r.value
	}
	return out, errors.Join(errs...)
}

type childResult[R any] struct {
	value R
	err   error
}

// childrenNamed returns d's children, or only the one called name when name is not "".
func (d *Delivery) childrenNamed(ctx context.Context, name string) ([]engine.Child, error) {
	if d == nil || d.eng == nil {
		return nil, fmt.Errorf("%w: a Delivery not made by a Worker has no children", ErrInvalid)
	}
	cs, err := d.eng.Children(ctx, d.ID)
	if err != nil || name == "" {
		return cs, err
	}
	for _, c := range cs {
		if c.Name == name {
			return []engine.Child{c}, nil
		}
	}
	return nil, fmt.Errorf("%w: task %s spawned no child %q", ErrNotFound, d.ID, name)
}

// childResults reads and decodes the outcomes of cs.
func childResults[R any](ctx context.Context, d *Delivery, cs []engine.Child) ([]childResult[R], error) {
	os, errs, err := d.eng.ChildOutcomes(ctx, cs)
	if err != nil {
		return nil, err
	}
	out := make([]childResult[R], len(cs))
	for i, o := range os {
		switch {
		case errs[i] != nil:
			out[i].err = fmt.Errorf("child %s: %w", cs[i].ID, errs[i])
		case !o.Done():
			out[i].err = fmt.Errorf("%w: child %s is %s", ErrNotEnded, cs[i].ID, o.State)
		case o.State != engine.StateSucceeded:
			out[i].err = &TaskFailedError{ID: cs[i].ID, State: string(o.State), Reason: o.Error}
		case o.Result != nil:
			if err := d.codec.Unmarshal(o.Result, &out[i].value); err != nil {
				out[i].err = fmt.Errorf("srq: child %s: decode the result with %s: %w", cs[i].ID, d.codec.Name(), err)
			}
		}
	}
	return out, nil
}

// Progress encodes v with the queue's codec and records it as the task's progress: kept with the
// task (ProgressOf, the srq command's task view, the dashboard's task page) and written to the
// queue's event stream (EventProgress, when the queue keeps events). It fails with ErrStaleToken
// when the delivery's lease is no longer held, with ErrNotFound once the task has ended (it is
// gone, as for an ack), with the codec's error, with ErrInvalid on a Delivery a Worker did not
// make, and with the context's or Redis's error.
func (d *Delivery) Progress(ctx context.Context, v any) error {
	if d == nil || d.eng == nil || d.codec == nil {
		return fmt.Errorf("%w: a Delivery not made by a Worker has no task to report on", ErrInvalid)
	}
	b, err := d.codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("srq: task %s: encode the progress with %s: %w", d.ID, d.codec.Name(), err)
	}
	return d.eng.Progress(ctx, d.Receipt(), b)
}

// ProgressOf returns the last progress task id of q reported (Delivery.Progress), decoded into a
// P with q's codec, and whether it reported any: for a caller that waits for a task
// (PublishAndWait, WaitResult) to watch it meanwhile. On a sharded queue it asks every shard. It
// fails with ErrNotFound when the task does not exist (never published, or ended), with the
// codec's error, with ErrInvalid for a nil or zero queue or an invalid id, and with the context's
// or Redis's error.
func ProgressOf[P, T any](ctx context.Context, q *Queue[T], id string) (P, bool, error) {
	var p P
	if !q.made() {
		return p, false, errNotMade
	}
	var errs []error
	for _, eng := range q.shards.engines {
		wf, err := eng.WorkflowOf(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if wf.Progress == nil {
			return p, false, nil
		}
		if err := q.codec.Unmarshal(wf.Progress, &p); err != nil {
			return p, false, fmt.Errorf("srq: task %s: decode the progress with %s: %w", id, q.codec.Name(), err)
		}
		return p, true, nil
	}
	if err := errors.Join(errs...); err != nil {
		return p, false, err
	}
	return p, false, fmt.Errorf("%w: task %s", ErrNotFound, id)
}

// Signal sends signal name, with value encoded by q's codec, to task id of q: a task waiting for
// it (WaitSignal) resumes now and reads it (SignalValue); any other keeps it until it waits for
// it (the wait then ends at once) or ends. One signal of a name is kept at a time: Signal returns
// false when the task keeps one of that name already, which this one did not change, and true
// when the signal was taken. On a sharded queue it finds the task's shard. It fails with
// ErrNotFound when the task does not exist (never published, or ended), with ErrInvalid for an
// invalid id or name (1 to 128 bytes of UTF-8, no NUL) or a nil or zero queue, with the codec's
// error, and with the context's or Redis's error.
func (q *Queue[T]) Signal(ctx context.Context, id, name string, value any) (bool, error) {
	if !q.made() {
		return false, errNotMade
	}
	b, err := q.codec.Marshal(value)
	if err != nil {
		return false, fmt.Errorf("srq: signal %q: encode with %s: %w", name, q.codec.Name(), err)
	}
	var errs []error
	for _, eng := range q.shards.engines {
		taken, err := eng.Signal(ctx, id, name, b)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return taken, nil
	}
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%w: task %s", ErrNotFound, id)
}
