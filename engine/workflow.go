package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Dynamic workflows (lua/includes/flow.lua): a running task spawns children, tasks of any queue
// whose ids derive from its own, and waits for them, for a signal or for a time without holding
// its lease; its state rides along between its runs.

// WaitKind is what a waiting task waits for.
type WaitKind byte

// The kinds of waits.
const (
	WaitSleep    WaitKind = 't' // a time: Rejection.Delay
	WaitSignal   WaitKind = 's' // a signal of a name, for at most Rejection.Delay when it is not 0
	WaitChildren WaitKind = 'c' // the children it spawned
)

// Wait makes a Rejection a wait: the delivery ends without counting an attempt, and the task runs
// again when what it waits for comes.
type Wait struct {
	Kind WaitKind
	// Signal is the name of the signal waited for (WaitSignal).
	Signal string
	// State, when not nil, is kept with the task for its next run (WorkflowOf).
	State []byte
}

// spec is the wait as lua/reject.lua takes it.
func (w *Wait) spec() string {
	if w == nil {
		return ""
	}
	if w.Kind == WaitSignal {
		return "s" + w.Signal
	}
	return string(w.Kind)
}

// valid checks a wait's kind and signal name.
func (w *Wait) valid() error {
	switch w.Kind {
	case WaitSleep, WaitChildren:
		return nil
	case WaitSignal:
		return validSignalName(w.Signal)
	}
	return fmt.Errorf("unknown wait kind %q", w.Kind)
}

// MaxSignalNameLen is the longest signal name, in bytes.
const MaxSignalNameLen = 128

// validSignalName checks a signal's name: 1 to MaxSignalNameLen bytes of UTF-8, no NUL.
func validSignalName(name string) error {
	switch {
	case name == "":
		return errors.New("empty signal name")
	case len(name) > MaxSignalNameLen:
		return fmt.Errorf("signal name of %d bytes is over %d", len(name), MaxSignalNameLen)
	case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
		return fmt.Errorf("signal name %q is not UTF-8 without NUL", name)
	}
	return nil
}

// ChildID returns the task id of child name of task parent.
func ChildID(parent, name string) string { return parent + "/" + name }

// ChildOf returns m as child name of task parentID, which lives on parent (its queue or shard),
// through an edge of policy (0: FailDependents), to publish with Publish on any engine of the same
// client: its id is ChildID(parentID, name), and a child whose id was published before (pending,
// running, or ended with its outcome kept) is a duplicate, so a parent that runs again and spawns
// the same names creates nothing twice. Its outcome is kept for m.KeepOutcome (DefaultFlowKeep when
// 0) for its parent to read. Publish registers it with its parent before it writes it (in the same
// call when they share a slot, else in one call at the parent's slot first), and fails with
// ErrNotFound, writing nothing of it, when the parent does not exist. When every child has ended,
// or one failed through a FailDependents edge, a parent waiting for its children (WaitChildren)
// runs again. ChildOf fails with ErrInvalid for an invalid name, policy or parent id, or a message
// with an ID or Wait.
func ChildOf(m Message, parent *Engine, parentID, name string, policy EdgePolicy) (Message, error) {
	if parent == nil {
		return Message{}, invalidf("child %q: no parent engine", name)
	}
	if err := validID(parentID, false); err != nil {
		return Message{}, fmt.Errorf("%w: parent: %w", ErrInvalid, err)
	}
	if err := validStepName("child", name); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if policy == 0 {
		policy = FailDependents
	}
	switch {
	case !policy.valid():
		return Message{}, invalidf("child %q: unknown policy %d", name, policy)
	case m.ID != "":
		return Message{}, invalidf("child %q: Message.ID is set; a child's id is its parent's and its name", name)
	case m.Wait:
		return Message{}, invalidf("child %q: Wait is set; a child's parent reads its outcome", name)
	}
	m.ID = ChildID(parentID, name)
	if err := validID(m.ID, false); err != nil {
		return Message{}, fmt.Errorf("%w: child %q: %w", ErrInvalid, name, err)
	}
	if m.KeepOutcome == 0 {
		m.KeepOutcome = DefaultFlowKeep
	}
	m.parent, m.policy = parent.keys.base+parentID, policy
	return m, nil
}

// SpawnChild is one child a running task spawns (Spawn).
type SpawnChild struct {
	// Name names the child within its parent: at most MaxStepNameLen bytes of UTF-8, no '/'.
	Name string
	// Message is the child task, as for Publish, with no ID (ChildOf).
	Message Message
	// Policy says what the child's failure does to a parent waiting for its children:
	// FailDependents (the default) ends the wait at once; ContinueDependents and IgnoreFailure
	// let it go on until every child ended.
	Policy EdgePolicy
}

// Spawn publishes children of task parentID, which lives on parent, to e, as ChildOf and Publish
// say. It fails with ErrInvalid for two children of one name, and as ChildOf and Publish do.
func (e *Engine) Spawn(ctx context.Context, parent *Engine, parentID string, children []SpawnChild) ([]PublishResult, error) {
	msgs := make([]Message, len(children))
	seen := make(map[string]bool, len(children))
	for i, c := range children {
		if seen[c.Name] {
			return nil, invalidf("child %d: the name %q is spawned twice", i, c.Name)
		}
		seen[c.Name] = true
		m, err := ChildOf(c.Message, parent, parentID, c.Name, c.Policy)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return e.Publish(ctx, msgs)
}

// registerChildren registers, with their parents, the children among msgs whose parents live in
// another slot than e: one call per parent (lua/spawn.lua). It fails with ErrNotFound when a parent
// does not exist, and with the context's or Redis's error.
func (e *Engine) registerChildren(ctx context.Context, msgs []Message) error {
	type parent struct {
		base, id string
		args     []any // spawn.lua's arguments
	}
	var parents []*parent // in order of first appearance; a publish's children share one
	for i := range msgs {
		m := &msgs[i]
		if m.parent == "" {
			continue
		}
		base, pid := refSplit(m.parent)
		if base == e.keys.base {
			continue // in this slot: publish.lua registers it
		}
		j := slices.IndexFunc(parents, func(p *parent) bool { return p.base == base && p.id == pid })
		if j < 0 {
			parents = append(parents, &parent{base: base, id: pid, args: []any{pid}})
			j = len(parents) - 1
		}
		parents[j].args = append(parents[j].args, m.ID[len(pid)+1:], string(m.policy), e.keys.base)
	}
	for _, p := range parents {
		res, err := e.at(p.base).run(ctx, scriptSpawn, p.args...)
		if err != nil {
			return err
		}
		if code, _ := res.(int64); code == codeNotFound {
			return fmt.Errorf("%w: parent task %s (it ended)", ErrNotFound, p.id)
		}
	}
	return nil
}

// refSplit splits a task's ref into its key base and id: the base ends at the first "}:", which
// neither a prefix nor a queue name holds (lua/includes/flow.lua's ref_split).
func refSplit(ref string) (base, id string) {
	i := strings.Index(ref, "}:")
	if i < 0 {
		return "", ref
	}
	return ref[:i+2], ref[i+2:]
}

// Signal sends signal name with value to task id: a task waiting for it resumes now and reads it
// (WorkflowOf); any other keeps it until it waits for it (that wait then ends at once) or ends,
// one signal of a name at a time. It returns whether the signal was taken: false when the task
// keeps a signal of that name already, which this one did not change. It fails with ErrNotFound
// when the task does not exist (never published, or ended), with ErrInvalid for an invalid id or
// name, and with the context's or Redis's error.
func (e *Engine) Signal(ctx context.Context, id, name string, value []byte) (bool, error) {
	if err := validID(id, false); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := validSignalName(name); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	res, err := e.run(ctx, scriptSignal, id, name, value)
	if err != nil {
		return false, err
	}
	codes, err := replyCodes(e.relayMarked(res, 1), 1)
	if err != nil {
		return false, err
	}
	switch codes[0] {
	case codeDuplicate:
		return false, nil
	case codeNotFound:
		return false, fmt.Errorf("%w: task %s", ErrNotFound, id)
	}
	return true, codeError(codes[0])
}

// Progress records the progress of the task r delivered, value as its handler reports it, and
// tells the event stream (EventProgress). It fails with ErrStaleToken when the delivery's lease
// is no longer held, with ErrNotFound when the task is gone, and with the context's or Redis's
// error.
func (e *Engine) Progress(ctx context.Context, r Receipt, value []byte) error {
	res, err := e.run(ctx, scriptProgress, r.ID, r.Token.String(), value)
	if err != nil {
		return err
	}
	code, err := replyInt(res)
	if err != nil {
		return err
	}
	return codeError(code)
}

// Workflow is what a task keeps for its next run (WorkflowOf).
type Workflow struct {
	// State is what the task set before its last wait; nil for none.
	State []byte
	// Waited is what its last wait was for: WaitSleep, WaitSignal or WaitChildren; 0 for none.
	Waited WaitKind
	// WaitedSignal is the name of the signal its last wait was for.
	WaitedSignal string
	// Signal and SignalValue are the signal that ended its last wait; Signal is "" when none did
	// (the wait's time ended first, or it waited for something else).
	Signal      string
	SignalValue []byte
	// Children counts the children it spawned that have not ended; FailedChildren those that
	// failed through a FailDependents edge.
	Children, FailedChildren int
	// Progress is the last progress it reported; nil for none.
	Progress []byte
}

// WorkflowOf reads what task id keeps between its runs. It fails with ErrNotFound when the task
// does not exist, with ErrInvalid for an invalid id, and with the context's or Redis's error.
func (e *Engine) WorkflowOf(ctx context.Context, id string) (Workflow, error) {
	if err := validID(id, false); err != nil {
		return Workflow{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	f, err := e.client.HMGet(ctx, e.keys.Task(id), "p", "Z", "L", "G", "R", "B", "P").Result()
	if err != nil {
		return Workflow{}, fmt.Errorf("srq: task %s: %w", id, err)
	}
	if f[0] == nil {
		return Workflow{}, fmt.Errorf("%w: task %s", ErrNotFound, id)
	}
	str := func(i int) string { s, _ := f[i].(string); return s }
	var w Workflow
	if s := str(1); f[1] != nil {
		w.State = []byte(s)
	}
	if s := str(2); s != "" {
		w.Waited = WaitKind(s[0])
		if w.Waited == WaitSignal {
			w.WaitedSignal = s[1:]
		}
	}
	if name, value, ok := strings.Cut(str(3), "\x00"); ok {
		w.Signal, w.SignalValue = name, []byte(value)
	}
	w.Children, w.FailedChildren = int(atoi64(str(4))), int(atoi64(str(5)))
	if f[6] != nil {
		w.Progress = []byte(str(6))
	}
	return w, nil
}

// Child is one child a task spawned, as its parent knows it.
type Child struct {
	Name   string
	ID     string
	Queue  string
	Policy EdgePolicy
	// State is what the parent last heard of the child: StateSucceeded, StateDead (failed),
	// StateCancelled, or StatePending while it has not ended.
	State State
	base  string
}

// Children returns the children task id spawned, sorted by name. It fails with ErrInvalid for an
// invalid id and with the context's or Redis's error; a task that spawned none (or no longer
// exists) has none.
func (e *Engine) Children(ctx context.Context, id string) ([]Child, error) {
	if err := validID(id, false); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	m, err := e.client.HGetAll(ctx, e.keys.base+"fk:"+id).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("srq: children of %s: %w", id, err)
	}
	out := make([]Child, 0, len(m))
	for name, v := range m {
		p, ok := parseParent(name, v)
		if !ok {
			return nil, fmt.Errorf("srq: children of %s: malformed entry %q", id, v)
		}
		out = append(out, Child{Name: name, ID: ChildID(id, name), Queue: queueOfBase(p.base), Policy: p.Policy,
			State: p.State, base: p.base})
	}
	slices.SortFunc(out, func(a, b Child) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ChildOutcomes returns the outcomes of children, which Children returned for their parent on e:
// one call per slot the children live in (per 1,000 children), each child's error nil or
// ErrNotFound (its outcome is no longer kept). It fails with the context's or Redis's error.
func (e *Engine) ChildOutcomes(ctx context.Context, children []Child) ([]Outcome, []error, error) {
	os := make([]Outcome, len(children))
	errs := make([]error, len(children))
	byBase := map[string][]int{}
	var order []string
	for i, c := range children {
		if _, ok := byBase[c.base]; !ok {
			order = append(order, c.base)
		}
		byBase[c.base] = append(byBase[c.base], i)
	}
	for _, base := range order {
		idx := byBase[base]
		for lo := 0; lo < len(idx); lo += flowChunk {
			part := idx[lo:min(lo+flowChunk, len(idx))]
			ids := make([]string, len(part))
			for j, i := range part {
				ids[j] = children[i].ID
			}
			got, gotErrs, err := e.at(base).outcomes(ctx, ids, false)
			if err != nil {
				return nil, nil, err
			}
			for j, i := range part {
				os[i], errs[i] = got[j], gotErrs[j]
			}
		}
	}
	return os, errs, nil
}

// waitArgs appends r's wait and state to args, as lua/reject.lua takes them.
func waitArgs(args []any, r *Rejection) []any {
	if r.Wait == nil {
		return append(args, "", "")
	}
	return append(args, r.Wait.spec(), r.Wait.State)
}

// validStepName checks the name of a flow step or a spawned child (what is "step" or "child"): 1 to
// MaxStepNameLen bytes of UTF-8, no '/' (the name ends a task id after its flow's or parent's id).
func validStepName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a %s has no name", what)
	case len(name) > MaxStepNameLen:
		return fmt.Errorf("%s %q: the name is %d bytes, the limit is %d", what, name, len(name), MaxStepNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s %q: the name is not valid UTF-8", what, name)
	case strings.Contains(name, "/"):
		return fmt.Errorf("%s %q: the name holds '/'", what, name)
	}
	return nil
}
