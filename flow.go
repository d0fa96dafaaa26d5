package srq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// FailurePolicy says what a step does when a parent it depends on fails (is dead-lettered) or is
// cancelled. A parent's retries happen first, as for any task: it fails only once it is a dead
// letter.
type FailurePolicy = engine.EdgePolicy

// The failure policies of a dependency.
const (
	// FailDependents, the default, cancels the dependent step, with the parent's error recorded,
	// and with it the steps that depend on it the same way; the flow fails. While the failed
	// parent is a dead letter, a requeue of it reopens them, and the flow goes on.
	FailDependents = engine.FailDependents
	// ContinueDependents runs the dependent step once its other parents are done; it sees which
	// parents failed (Delivery.Parents).
	ContinueDependents = engine.ContinueDependents
	// IgnoreFailure runs the dependent step as if the parent had succeeded, without its result.
	IgnoreFailure = engine.IgnoreFailure
)

// MaxFlowSteps is the most steps one flow may have; MaxStepNameLen the longest step name.
const (
	MaxFlowSteps   = engine.MaxFlowSteps
	MaxStepNameLen = engine.MaxStepNameLen
)

// ErrFlowConflict is wrapped by the error for a flow one of whose steps' task ids exists already
// (a task published with the id "<flow id>/<step name>" outside the flow), or whose id names a
// flow kept in one of its queues (shards) other than its home (the flow's first step was there):
// nothing was published.
var ErrFlowConflict = engine.ErrFlowConflict

// flowHeader carries a step's flow id in its task's headers, so its Delivery knows its flow.
const flowHeader = "srq-flow"

// Step is one step of a Flow: a value for one queue, published as a task once every step it
// depends on is done. Make one with Queue.Step; its dependencies with After.
type Step struct {
	name    string
	queue   string
	shards  *shardSet
	msg     engine.Message
	after   []*Step
	policy  []FailurePolicy
	err     error // from Queue.Step: reported by PublishFlow
	headers map[string]string
}

// Step returns a flow step named name that publishes v to q with opts, as Publish would, once
// the steps it depends on (After) are done. opts.ID must be empty (a step's task id is "<flow
// id>/<name>"), and opts.Wait and KeepResult unset (a step's outcome is kept with its flow);
// Delay and At count from the step's release. An error (v cannot be encoded, invalid options) is
// reported by PublishFlow, which then writes nothing.
func (q *Queue[T]) Step(name string, v T, opts *PublishOpts) *Step {
	s := &Step{name: name, queue: q.Name()}
	if !q.made() {
		s.err = errNotMade
		return s
	}
	s.shards = q.shards
	var o PublishOpts
	if opts != nil {
		o = *opts
	}
	switch {
	case o.ID != "":
		s.err = fmt.Errorf("%w: step %q: PublishOpts.ID is set; a step's id is its flow's id and its name", ErrInvalid, name)
		return s
	case o.Wait || o.KeepResult != 0:
		s.err = fmt.Errorf("%w: step %q: PublishOpts.Wait or KeepResult is set; a step's outcome is kept with its flow", ErrInvalid, name)
		return s
	}
	msgs, err := q.messages([]Message[T]{{Value: v, Opts: o}})
	if err != nil {
		if !errors.Is(err, ErrInvalid) { // the codec's error: an invalid step all the same
			err = fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		s.err = fmt.Errorf("step %q: %w", name, err)
		return s
	}
	s.msg = msgs[0]
	s.headers = maps.Clone(o.Headers)
	return s
}

// Name returns the step's name.
func (s *Step) Name() string { return s.name }

// Queue returns the name of the step's queue.
func (s *Step) Queue() string { return s.queue }

// Partition returns the key of the step's partition ("!" and the name for an ordered one).
func (s *Step) Partition() partition.Key { return s.msg.Partition }

// After makes s depend on parents, with the FailDependents policy: s runs once they all
// succeeded. It returns s, so a flow reads as it runs: q.Step("ship", v, nil).After(charge).
func (s *Step) After(parents ...*Step) *Step { return s.AfterWith(FailDependents, parents...) }

// AfterWith makes s depend on parents with policy, which says what s does when one of them fails.
// It returns s.
func (s *Step) AfterWith(policy FailurePolicy, parents ...*Step) *Step {
	for _, p := range parents {
		s.after = append(s.after, p)
		s.policy = append(s.policy, policy)
	}
	return s
}

// Parents returns the steps s depends on, in the order After added them.
func (s *Step) Parents() []*Step { return append([]*Step(nil), s.after...) }

// Header returns the value of header key of the step's task.
func (s *Step) Header(key string) string { return s.headers[key] }

// SetHeader sets header key of the step's task: flow middleware (tracing) writes its context here.
func (s *Step) SetHeader(key, value string) {
	if s.headers == nil {
		s.headers = map[string]string{}
	}
	s.headers[key] = value
}

// Chain makes each step depend on the one before it (FailDependents) and returns the steps, in
// order: Flow{Steps: srq.Chain(a, b, c)} runs a, then b, then c.
func Chain(steps ...*Step) []*Step {
	for i := 1; i < len(steps); i++ {
		steps[i].After(steps[i-1])
	}
	return steps
}

// Flow is a DAG of steps, published together with PublishFlow: each step's task is published
// when the steps it depends on are done, across any number of queues, and a step reads its
// parents' results (ParentResult). The flow lives with its first step: its queue (its shard) keeps
// the flow's record, which Queue.Flow reads.
type Flow struct {
	// ID names the flow; publishing an id that exists is a duplicate. Empty: a new id. At most
	// 256 bytes with a step's name and a '/'.
	ID string
	// Steps are the flow's steps; every step another depends on must be among them. At most
	// MaxFlowSteps.
	Steps []*Step
	// Keep is how long the flow, and its steps' outcomes (results, errors), are kept after the
	// flow ended. Default 7 days.
	Keep time.Duration
	// Middleware wraps the flow's publish, first outermost: tracing (package middleware).
	Middleware []FlowMiddleware
}

// FlowResult tells what PublishFlow did: the flow's id (the generated one when the Flow had none),
// and whether a flow with that id existed already, in which case nothing was written.
type FlowResult struct {
	ID        string
	Duplicate bool
}

// FlowPublishFunc publishes a flow; it is what flow middleware wraps.
type FlowPublishFunc func(ctx context.Context, f *Flow) (FlowResult, error)

// FlowMiddleware wraps a FlowPublishFunc. It may set the steps' headers (Step.SetHeader) and the
// flow's ID before it calls next.
type FlowMiddleware func(next FlowPublishFunc) FlowPublishFunc

// PublishFlow publishes f whole or not at all: every step is written, those without parents
// available at once (or after their Delay), the others waiting for their parents, or none is.
// Each step's task then runs like any other of its queue (its partition's order, its retries);
// when it is acked, the steps waiting for it that now have every parent done become available in
// the same Redis call where they share its queue (its shard), and through a durable relay
// otherwise. It fails with ErrInvalid, before anything is written, for an invalid flow: no steps
// or more than MaxFlowSteps, a step whose Queue.Step failed, two steps of one name, a dependency
// on a step not in f, a cycle, queues on different Redis clients. It fails with an error wrapping
// ErrFlowConflict when a step's task id exists, writing nothing; and with the context's or
// Redis's error, after which the flow may or may not exist (publish it again with the same ID: a
// duplicate means it does).
func PublishFlow(ctx context.Context, f *Flow) (FlowResult, error) {
	if f == nil {
		return FlowResult{}, fmt.Errorf("%w: nil flow", ErrInvalid)
	}
	publish := FlowPublishFunc(publishFlow)
	for i := len(f.Middleware) - 1; i >= 0; i-- {
		if f.Middleware[i] == nil {
			return FlowResult{}, fmt.Errorf("%w: flow Middleware %d is nil", ErrInvalid, i)
		}
		if publish = f.Middleware[i](publish); publish == nil {
			return FlowResult{}, fmt.Errorf("%w: flow Middleware %d returned a nil FlowPublishFunc", ErrInvalid, i)
		}
	}
	return publish(ctx, f)
}

func publishFlow(ctx context.Context, f *Flow) (FlowResult, error) {
	id := f.ID
	if id == "" {
		id = engine.NewID()
	}
	spec, registered, err := flowSpec(f, id)
	if err != nil {
		return FlowResult{}, err
	}
	if err := engine.ValidateFlow(spec); err != nil {
		return FlowResult{}, err
	}
	for _, s := range registered {
		if err := s.register(ctx); err != nil {
			return FlowResult{}, err
		}
	}
	dup, err := engine.PublishFlow(ctx, spec)
	return FlowResult{ID: spec.ID, Duplicate: dup}, err
}

// flowSpec returns the engine's spec of f with the flow id id, and the queues its steps go to. It
// fails with ErrInvalid for a nil step, a step whose Queue.Step failed, or a dependency on a step
// not in f.
func flowSpec(f *Flow, id string) (*engine.FlowSpec, []*shardSet, error) {
	spec := &engine.FlowSpec{ID: id, Keep: f.Keep, Steps: make([]engine.FlowStep, len(f.Steps))}
	in := make(map[*Step]bool, len(f.Steps))
	for _, s := range f.Steps {
		if s == nil {
			return nil, nil, fmt.Errorf("%w: a nil step", ErrInvalid)
		}
		in[s] = true
	}
	var registered []*shardSet
	for i, s := range f.Steps {
		if s.err != nil {
			return nil, nil, s.err
		}
		st := engine.FlowStep{Name: s.name, Message: s.msg}
		st.Engine = s.shards.of(st.Message.Partition)
		st.Message.Headers = maps.Clone(s.headers)
		if st.Message.Headers == nil {
			st.Message.Headers = map[string]string{}
		}
		st.Message.Headers[flowHeader] = spec.ID
		for j, p := range s.after {
			if !in[p] {
				return nil, nil, fmt.Errorf("%w: step %q depends on step %q, which is not in the flow", ErrInvalid, s.name, p.name)
			}
			st.After = append(st.After, engine.FlowEdge{Parent: p.name, Policy: s.policy[j]})
		}
		spec.Steps[i] = st
		if !containsSet(registered, s.shards) {
			registered = append(registered, s.shards)
		}
	}
	return spec, registered, nil
}

func containsSet(sets []*shardSet, s *shardSet) bool {
	for _, x := range sets {
		if x == s {
			return true
		}
	}
	return false
}

// FlowID returns the id of the flow whose step d is, "" for a task that is no flow step.
func (d *Delivery) FlowID() string { return d.Headers[flowHeader] }

// Step returns the name of the flow step d is, "" for a task that is no flow step.
func (d *Delivery) Step() string {
	fid := d.FlowID()
	if fid == "" || len(d.ID) <= len(fid)+1 {
		return ""
	}
	return d.ID[len(fid)+1:]
}

// ParentState is one parent of a flow step, as the step knows it.
type ParentState struct {
	Name   string
	Policy FailurePolicy
	// State is "succeeded", "dead" (failed), "cancelled", or "pending" while the parent has not
	// ended (a step with ContinueDependents or IgnoreFailure parents may run before they do).
	State string
}

// Parents returns the parents of flow step d, sorted by name, with what became of each: for a
// step to see which parents failed (ContinueDependents). It fails with ErrNotFound for a task that
// is no flow step, and with the context's or Redis's error.
func (d *Delivery) Parents(ctx context.Context) ([]ParentState, error) {
	if d.eng == nil || d.FlowID() == "" {
		return nil, fmt.Errorf("%w: task %s is no flow step", ErrNotFound, d.ID)
	}
	ps, err := d.eng.Parents(ctx, d.ID)
	if err != nil {
		return nil, err
	}
	out := make([]ParentState, len(ps))
	for i, p := range ps {
		out[i] = ParentState{Name: p.Name, Policy: p.Policy, State: string(p.State)}
	}
	return out, nil
}

// ParentResult returns the result of parent step name of flow step d, decoded into an R with the
// codec of d's queue (the flow's queues must then share one codec, or the parent's result must
// decode with it). It fails with ErrNotFound when d is no flow step or has no parent of that name,
// or the parent's outcome is no longer kept; with ErrNotEnded while the parent has not ended; with
// a *TaskFailedError when the parent failed or was cancelled; with the codec's error when the
// result does not decode into an R; and with the context's or Redis's error.
func ParentResult[R any](ctx context.Context, d *Delivery, name string) (R, error) {
	var r R
	fid := d.FlowID()
	if d.eng == nil || fid == "" {
		return r, fmt.Errorf("%w: task %s is no flow step", ErrNotFound, d.ID)
	}
	o, err := d.eng.ParentOutcome(ctx, d.ID, fid, name)
	if err != nil {
		return r, err
	}
	id := engine.StepID(fid, name)
	switch {
	case !o.Done():
		return r, fmt.Errorf("%w: step %s is %s", ErrNotEnded, id, o.State)
	case o.State != engine.StateSucceeded:
		return r, &TaskFailedError{ID: id, State: string(o.State), Reason: o.Error}
	case o.Result == nil:
		return r, nil
	}
	if err := d.codec.Unmarshal(o.Result, &r); err != nil {
		return r, fmt.Errorf("srq: step %s: decode the result with %s: %w", id, d.codec.Name(), err)
	}
	return r, nil
}

// FlowInfo is a flow as Queue.Flow reads it: its state, counts and every step's state.
type FlowInfo = engine.FlowInfo

// The states of a flow (FlowInfo.State).
const (
	FlowRunning    = engine.FlowRunning
	FlowCompleted  = engine.FlowCompleted
	FlowFailed     = engine.FlowFailed
	FlowPublishing = engine.FlowPublishing
)

// Flow reads flow id, whose first step was published to q (the flow lives with its first step),
// with every step's state. On a sharded queue it asks every shard. It fails with ErrNotFound when
// no such flow exists (never published, or past its retention), with ErrInvalid for a nil or zero
// queue, and with the context's or Redis's error.
func (q *Queue[T]) Flow(ctx context.Context, id string) (FlowInfo, error) {
	if !q.made() {
		return FlowInfo{}, errNotMade
	}
	var errs []error
	for _, eng := range q.shards.engines {
		f, err := eng.Flow(ctx, id)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return FlowInfo{}, err
	}
	return FlowInfo{}, fmt.Errorf("%w: flow %s", ErrNotFound, id)
}
