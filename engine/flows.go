package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits of a flow.
const (
	// MaxFlowSteps is the most steps one flow may have.
	MaxFlowSteps = 20_000
	// MaxStepNameLen is the longest step name, in bytes.
	MaxStepNameLen = 64
	// DefaultFlowKeep is how long a flow, and its steps' outcomes, are kept after it ended when
	// FlowSpec.Keep is zero.
	DefaultFlowKeep = 7 * 24 * time.Hour
	// flowChunk is the most steps one call of flow_publish.lua writes: a larger flow, or one over
	// several slots, is written in parts that only a last call makes visible.
	flowChunk = 1000
	// relayPage is the most outbox messages one relay round reads.
	relayPage = 256
)

var (
	// ErrFlowConflict is wrapped by the error for a flow one of whose steps' task ids exists
	// already (a task published with that id outside the flow), or whose id names a flow that
	// lives in another of its queues (shards): nothing was published.
	ErrFlowConflict = errors.New("srq: flow conflict")
	// ErrFlowAborted is wrapped by the error for a flow whose publish took so long that it was
	// undone (RecoverFlows) before it completed: nothing was published.
	ErrFlowAborted = errors.New("srq: the flow's publish was undone before it completed")
)

// EdgePolicy says what a step does when a parent it depends on fails (is dead-lettered) or is
// cancelled.
type EdgePolicy byte

// The edge policies.
const (
	// FailDependents cancels the dependent step (and so its own fail dependents) and fails the
	// flow. While the failed parent is a dead letter, a requeue of it reopens the step.
	FailDependents EdgePolicy = 'f'
	// ContinueDependents lets the dependent step run once its other parents are done; it sees
	// which parents failed.
	ContinueDependents EdgePolicy = 'c'
	// IgnoreFailure lets the dependent step run as if the parent had succeeded.
	IgnoreFailure EdgePolicy = 'i'
)

func (p EdgePolicy) valid() bool {
	return p == FailDependents || p == ContinueDependents || p == IgnoreFailure
}

// String names the policy.
func (p EdgePolicy) String() string {
	switch p {
	case FailDependents:
		return "fail"
	case ContinueDependents:
		return "continue"
	case IgnoreFailure:
		return "ignore"
	}
	return fmt.Sprintf("EdgePolicy(%d)", byte(p))
}

// FlowEdge is one dependency of a step: the parent step's name and the policy on its failure.
type FlowEdge struct {
	Parent string
	Policy EdgePolicy
}

// FlowStep is one step of a FlowSpec: a task published on Engine (its queue, or the shard of it
// that holds Message.Partition) once every parent is done.
type FlowStep struct {
	// Name names the step within its flow: at most MaxStepNameLen bytes of UTF-8, no '/'. The
	// step's task id is "<flow id>/<name>".
	Name string
	// Engine is the queue (shard) the step is published on. Every step of a flow must use engines
	// on one Redis client.
	Engine *Engine
	// Message is the task, as for Publish; its ID must be empty (the step's id is derived), its
	// KeepOutcome and Wait unset (a step's outcome is kept with its flow). Delay and At count from
	// the step's release.
	Message Message
	// After names the steps this one waits for.
	After []FlowEdge
}

// FlowSpec is a flow to publish: a DAG of steps, run in dependency order across queues.
type FlowSpec struct {
	// ID names the flow; empty: a new id (NewID). At most MaxIDLen bytes with the step names.
	ID string
	// Keep is how long the flow and its steps' outcomes (results, errors) are kept after the flow
	// ended. Default DefaultFlowKeep.
	Keep  time.Duration
	Steps []FlowStep
}

// StepID returns the task id of step name of flow id.
func StepID(flowID, name string) string { return flowID + "/" + name }

// flowDef is a flow's definition as its home keeps it (fd:<fid>), for inspection and for undoing
// an unfinished publish.
type flowDef struct {
	Steps []flowDefStep `json:"steps"`
}

type flowDefStep struct {
	Name  string     `json:"n"`
	Queue string     `json:"q"`
	Base  string     `json:"b"`
	After [][]string `json:"a,omitempty"` // [parent name, policy]
}

// ValidateFlow checks spec as PublishFlow does, without writing anything. It fails with
// ErrInvalid.
func ValidateFlow(spec *FlowSpec) error {
	_, err := planFlow(spec)
	return err
}

// flowPlan is a checked FlowSpec: its steps by name, and by slot.
type flowPlan struct {
	spec   *FlowSpec
	ids    []string
	refs   []string           // key base .. task id, per step
	index  map[string]int     // step name -> index
	kids   [][]int            // children of each step
	groups map[string][]int   // key base -> steps in that slot, in spec order
	bases  []string           // the slots in order of first use; bases[0] is the home
	engs   map[string]*Engine // key base -> engine
	def    []byte
}

// planFlow validates spec and works out its plan. A generated flow id is written to spec.ID.
func planFlow(spec *FlowSpec) (*flowPlan, error) {
	if spec == nil || len(spec.Steps) == 0 {
		return nil, invalidf("a flow needs at least one step")
	}
	if len(spec.Steps) > MaxFlowSteps {
		return nil, invalidf("the flow has %d steps, the limit is %d (MaxFlowSteps)", len(spec.Steps), MaxFlowSteps)
	}
	if spec.Keep < 0 || spec.Keep > MaxDelay {
		return nil, invalidf("flow Keep %v is outside [0, %v]", spec.Keep, MaxDelay)
	}
	if spec.ID == "" {
		spec.ID = NewID()
	}
	if err := validID(spec.ID, false); err != nil {
		return nil, fmt.Errorf("%w: flow id: %w", ErrInvalid, err)
	}
	p := &flowPlan{spec: spec, index: map[string]int{}, groups: map[string][]int{}, engs: map[string]*Engine{}}
	n := len(spec.Steps)
	p.ids, p.refs, p.kids = make([]string, n), make([]string, n), make([][]int, n)
	for i := range spec.Steps {
		s := &spec.Steps[i]
		if err := validStepName("step", s.Name); err != nil {
			return nil, invalidf("step %d: %w", i, err)
		}
		switch {
		case s.Engine == nil:
			return nil, invalidf("step %q has no queue", s.Name)
		case s.Message.ID != "":
			return nil, invalidf("step %q: Message.ID is set; a step's id is the flow id and its name", s.Name)
		case s.Message.KeepOutcome != 0 || s.Message.Wait:
			return nil, invalidf("step %q: KeepOutcome or Wait is set; a step's outcome is kept with its flow", s.Name)
		}
		if _, dup := p.index[s.Name]; dup {
			return nil, invalidf("two steps are named %q", s.Name)
		}
		p.index[s.Name] = i
		if s.Engine.client != spec.Steps[0].Engine.client {
			return nil, invalidf("step %q: its queue uses another Redis client than step %q's; a flow's queues share one",
				s.Name, spec.Steps[0].Name)
		}
		if err := s.Engine.validateMessage(&s.Message); err != nil {
			return nil, fmt.Errorf("%w: step %q: %w", ErrInvalid, s.Name, err)
		}
		p.ids[i] = StepID(spec.ID, s.Name)
		if err := validID(p.ids[i], false); err != nil {
			return nil, fmt.Errorf("%w: step %q: %w", ErrInvalid, s.Name, err)
		}
		base := s.Engine.keys.Base()
		p.refs[i] = base + p.ids[i]
		if _, ok := p.groups[base]; !ok {
			p.bases = append(p.bases, base)
			p.engs[base] = s.Engine
		}
		p.groups[base] = append(p.groups[base], i)
	}
	def := flowDef{Steps: make([]flowDefStep, n)}
	for i := range spec.Steps {
		s := &spec.Steps[i]
		seen := map[string]bool{}
		def.Steps[i] = flowDefStep{Name: s.Name, Queue: s.Engine.cfg.Queue, Base: s.Engine.keys.Base()}
		for _, e := range s.After {
			j, ok := p.index[e.Parent]
			switch {
			case !ok:
				return nil, invalidf("step %q depends on %q, which is not a step of the flow", s.Name, e.Parent)
			case j == i:
				return nil, invalidf("step %q depends on itself", s.Name)
			case seen[e.Parent]:
				return nil, invalidf("step %q depends on %q twice", s.Name, e.Parent)
			case e.Policy != 0 && !e.Policy.valid():
				return nil, invalidf("step %q: unknown policy %d on %q", s.Name, e.Policy, e.Parent)
			}
			seen[e.Parent] = true
			p.kids[j] = append(p.kids[j], i)
			def.Steps[i].After = append(def.Steps[i].After, []string{e.Parent, cmpPolicy(e.Policy).String()})
		}
	}
	if cyc := p.cycle(); cyc != "" {
		return nil, invalidf("the flow has a cycle through step %q", cyc)
	}
	var err error
	if p.def, err = json.Marshal(def); err != nil {
		return nil, fmt.Errorf("srq: flow definition: %w", err)
	}
	return p, nil
}

func cmpPolicy(p EdgePolicy) EdgePolicy {
	if p == 0 {
		return FailDependents
	}
	return p
}

// cycle returns the name of a step on a cycle, or "" when the steps form a DAG (Kahn's algorithm).
func (p *flowPlan) cycle() string {
	steps := p.spec.Steps
	waits := make([]int, len(steps))
	for i := range steps {
		waits[i] = len(steps[i].After)
	}
	var ready []int
	for i, w := range waits {
		if w == 0 {
			ready = append(ready, i)
		}
	}
	done := 0
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, k := range p.kids[i] {
			if waits[k]--; waits[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	if done == len(steps) {
		return ""
	}
	for i, w := range waits {
		if w > 0 {
			return steps[i].Name
		}
	}
	return ""
}

// stepArgs appends flow_publish.lua's 11 values of step i to args.
func (p *flowPlan) stepArgs(args []any, i int) []any {
	s := &p.spec.Steps[i]
	m := &s.Message
	var at int64
	if !m.At.IsZero() {
		at = max(m.At.UnixMilli(), 1)
	}
	parents, children := "", ""
	if len(s.After) > 0 {
		refs := make([]string, len(s.After))
		for j, e := range s.After {
			refs[j] = string(cmpPolicy(e.Policy)) + p.refs[p.index[e.Parent]]
		}
		parents = mustJSON(refs)
	}
	if len(p.kids[i]) > 0 {
		refs := make([]string, len(p.kids[i]))
		for j, k := range p.kids[i] {
			refs[j] = p.refs[k]
		}
		children = mustJSON(refs)
	}
	return append(args, p.ids[i], string(m.Partition), m.Priority, m.Delay.Milliseconds(), at, m.MaxAttempts,
		encodeHeaders(m.Headers), m.Payload, flag(m.HoldOnDead), parents, children)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings only
	}
	return string(b)
}

// PublishFlow publishes spec whole or not at all: every step is written, the first ones (no
// parents) pending, the others waiting for their parents, or none is. A flow whose steps all live
// in one slot (one queue, or one shard) and number at most 1,000 is one call; any other is
// written in parts that only a last call at the flow's home (its first step's queue) makes
// visible, and a publish that fails or dies before that is undone (RecoverFlows). It reports a
// duplicate, writing nothing, when a flow with spec.ID exists (running, or ended and within its
// retention); a generated id is written to spec.ID. It fails with ErrInvalid, before anything is
// written, for an invalid flow (no steps, too many, a duplicate or invalid name, an unknown
// dependency, a cycle, an invalid message, queues on different clients); with an error wrapping
// ErrFlowConflict when a step's task id exists; with one wrapping ErrFlowAborted when the publish
// was undone meanwhile; and with the context's or Redis's error, after which the flow may or may
// not exist (publish it again with the same id to find out: a duplicate means it does).
func PublishFlow(ctx context.Context, spec *FlowSpec) (duplicate bool, err error) {
	p, err := planFlow(spec)
	if err != nil {
		return false, err
	}
	keep := cmpDuration(spec.Keep, DefaultFlowKeep).Milliseconds()
	home := p.engs[p.bases[0]]
	if len(p.bases) == 1 && len(spec.Steps) <= flowChunk {
		args := []any{"all", spec.ID, keep, p.def}
		for i := range spec.Steps {
			args = p.stepArgs(args, i)
		}
		res, err := home.run(ctx, scriptFlowPub, args...)
		if err != nil {
			return false, err
		}
		return p.result(res)
	}
	return p.publishParts(ctx, home, keep)
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// result reads flow_publish.lua's reply.
func (p *flowPlan) result(res any) (duplicate bool, err error) {
	if code, ok := res.(int64); ok {
		switch code {
		case codeOK:
			return false, nil
		case codeDuplicate:
			return true, nil
		case codeAborted:
			return false, fmt.Errorf("%w: flow %s", ErrFlowAborted, p.spec.ID)
		}
		return false, codeError(code)
	}
	rows, err := replySlice(res)
	if err == nil && len(rows) == 2 {
		if code, _ := replyInt(rows[0]); code == codeConflict {
			id, _ := replyString(rows[1])
			if id == p.spec.ID {
				return false, fmt.Errorf("%w: flow %s: a flow of this id lives in another queue (or shard) of this flow: the one its first step was in", ErrFlowConflict, p.spec.ID)
			}
			return false, fmt.Errorf("%w: flow %s: task %s exists already", ErrFlowConflict, p.spec.ID, id)
		}
	}
	return false, fmt.Errorf("srq: publish flow: malformed reply %v", res)
}

// publishParts publishes a flow over several calls: claim the id at the home, write each slot's
// steps held, commit at the home, then relay the home's outbox so the first steps in other slots
// are released now rather than by the next relay. The publish's nonce names its claim, so a call
// whose reply was lost is settled by the undo (abort): a claim that ran is taken back, and a
// commit that ran is kept (the flow runs whole and the publish succeeded).
func (p *flowPlan) publishParts(ctx context.Context, home *Engine, keep int64) (bool, error) {
	nonce := NewID()
	names := make([]any, 0, 5+len(p.spec.Steps))
	names = append(names, "claim", p.spec.ID, keep, p.def, nonce)
	for i := range p.spec.Steps {
		names = append(names, p.spec.Steps[i].Name)
	}
	written := map[string][]string{} // key base -> ids written there
	// undo takes the publish back after cause; it reports whether the flow had committed after
	// all (a commit whose reply was lost), and then the publish succeeded.
	undo := func(cause error) (bool, error) {
		// The context may be what ended; the undo still runs, bounded by its own timeout.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		committed, err := p.abort(actx, written, nonce)
		switch {
		case committed:
			return true, nil
		case err != nil:
			return false, fmt.Errorf("%w (and undoing the publish failed: %w; a worker of the home queue undoes it after 5 minutes)", cause, err)
		}
		return false, cause
	}
	res, err := home.run(ctx, scriptFlowPub, names...)
	if err != nil {
		_, err = undo(err) // the claim may have run: take it back
		return false, err
	}
	if dup, err := p.result(res); dup || err != nil {
		return dup, err
	}
	for _, base := range p.bases {
		steps := p.groups[base]
		for lo := 0; lo < len(steps); lo += flowChunk {
			chunk := steps[lo:min(lo+flowChunk, len(steps))]
			args := []any{"part", p.spec.ID, keep, home.keys.Base()}
			for _, i := range chunk {
				args = p.stepArgs(args, i)
			}
			// Recorded before the call: a call that fails may have written them.
			for _, i := range chunk {
				written[base] = append(written[base], p.ids[i])
			}
			res, err := p.engs[base].run(ctx, scriptFlowPub, args...)
			if err == nil {
				if _, err = p.result(res); err != nil {
					// Refused: the call wrote nothing, and the ids it names may be another
					// flow's, which the undo must not touch.
					written[base] = written[base][:len(written[base])-len(chunk)]
				}
			}
			if err != nil {
				_, err = undo(err)
				return false, err
			}
		}
	}
	commit := []any{"commit", p.spec.ID, nonce}
	for _, base := range p.bases {
		commit = append(commit, base)
	}
	res, err = home.run(ctx, scriptFlowPub, commit...)
	if err == nil {
		_, err = p.result(res)
	}
	if err != nil {
		// Refused (the publish was undone meanwhile) or its reply lost: the undo finds out.
		if committed, err := undo(err); !committed {
			return false, err
		}
	}
	_, _ = home.Relay(ctx) // best effort: any consumer's relay delivers what is left
	return false, nil
}

// abort undoes a publish whose nonce is nonce: at the home first, where it takes back the claim
// unless the flow committed (then it reports committed and touches nothing), then the parts
// written to each slot. An error at the home stops it: the other slots' parts stay held, for
// RecoverFlows.
func (p *flowPlan) abort(ctx context.Context, written map[string][]string, nonce string) (committed bool, err error) {
	var errs []error
	for bi, base := range p.bases {
		ids := written[base]
		first := nonce
		if bi > 0 {
			first = ""
			if len(ids) == 0 {
				continue
			}
		}
		for lo := 0; lo == 0 || lo < len(ids); lo += flowChunk {
			args := []any{"abort", p.spec.ID, first}
			for _, id := range ids[lo:min(lo+flowChunk, len(ids))] {
				args = append(args, id)
			}
			res, err := p.engs[base].run(ctx, scriptFlowPub, args...)
			switch {
			case err != nil && bi == 0 && lo == 0:
				return false, err // the claim's fate is unknown: the parts must stay
			case err != nil:
				errs = append(errs, err)
			case res == int64(codeFinished):
				return true, nil
			}
			first = "" // the claim goes with the first call
		}
	}
	return false, errors.Join(errs...)
}

// at returns an engine for the slot whose key base is base, on e's client and configuration,
// to deliver flow messages there and read the outcomes of steps that live there.
func (e *Engine) at(base string) *Engine {
	if base == e.keys.Base() {
		return e
	}
	if v, ok := e.siblings.Load(base); ok {
		return v.(*Engine)
	}
	cfg := e.cfg
	cfg.Queue, cfg.Events = queueOfBase(base), 0 // flow_apply.lua reads the cap its queue announced
	sib := newEngine(e.client, cfg, Keys{base: base})
	v, _ := e.siblings.LoadOrStore(base, sib)
	return v.(*Engine)
}

// queueOfBase returns the queue name in key base "<prefix>:{<queue>}:".
func queueOfBase(base string) string {
	i, j := strings.Index(base, "{"), strings.Index(base, "}")
	if i < 0 || j < i {
		return ""
	}
	return base[i+1 : j]
}

// RelayDue receives a value when a call of e wrote to its flow outbox (a flow step's end that
// signals steps in other slots, or more than a call applies itself): a worker then runs Relay.
// Calls of other processes, and the operator's (requeue, purge), are relayed by the workers'
// periodic Relay.
func (e *Engine) RelayDue() <-chan struct{} { return e.relayDue }

func (e *Engine) markRelay() {
	select {
	case e.relayDue <- struct{}{}:
	default:
	}
}

// outboxMsg is what the relay reads of an outbox message: where it goes.
type outboxMsg struct {
	Base string `json:"b"`
}

// Relay delivers the messages of e's flow outbox (signals to steps and notes to flows in other
// slots, written in the same call as the end of a step) to their slots, and removes them; a page
// of 256 a round, until the outbox is empty (what a delivery to this slot writes to it, such as
// the next part of a large fan-out, is relayed too). A message is applied at most once however often it
// is delivered, so a relay that dies between a delivery and the removal loses nothing and
// applies nothing twice. Workers run it after acks that wrote to the outbox and every
// RecoverInterval. It returns how many messages it delivered. It fails with the context's or
// Redis's error, leaving the messages not delivered where they are.
func (e *Engine) Relay(ctx context.Context) (int, error) {
	total := 0
	for {
		msgs, err := e.client.ZRange(ctx, e.keys.base+"fo", 0, relayPage-1).Result()
		if err != nil {
			return total, fmt.Errorf("srq: relay: %w", err)
		}
		if len(msgs) == 0 {
			return total, nil
		}
		byBase := map[string][]any{}
		var order []string
		var done, bad []any
		for _, m := range msgs {
			var om outboxMsg
			if err := json.Unmarshal([]byte(m), &om); err != nil || !strings.HasSuffix(om.Base, "}:") {
				bad = append(bad, m) // not srq's: it could never be applied
				continue
			}
			if _, ok := byBase[om.Base]; !ok {
				order = append(order, om.Base)
			}
			byBase[om.Base] = append(byBase[om.Base], m)
		}
		var errs []error
		for _, base := range order {
			if _, err := e.at(base).run(ctx, scriptFlowApply, byBase[base]...); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, byBase[base]...)
		}
		if rm := append(done, bad...); len(rm) > 0 {
			if err := e.client.ZRem(ctx, e.keys.base+"fo", rm...).Err(); err != nil {
				errs = append(errs, err)
			}
		}
		total += len(done)
		if err := errors.Join(errs...); err != nil {
			return total, fmt.Errorf("srq: relay: %w", err)
		}
		if len(bad) > 0 {
			return total, fmt.Errorf("srq: relay: dropped %d unreadable outbox messages", len(bad))
		}
		// What the messages delivered here did may have written more (a fan-out's next part):
		// the loop reads the outbox again until it is empty.
	}
}

// RecoverFlows undoes the publishes of flows whose home is e that began more than timeout ago
// and never completed (their publisher failed or died between the parts and the commit): each
// slot's held steps are deleted, and so is the claim, so a late commit fails and nothing of the
// flow runs. It returns how many it undid. It fails with the context's or Redis's error.
func (e *Engine) RecoverFlows(ctx context.Context, timeout time.Duration) (int, error) {
	now, err := e.client.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("srq: recover flows: %w", err)
	}
	stale, err := e.client.ZRangeByScore(ctx, e.keys.base+"flowsp", &redis.ZRangeBy{
		Min: "-inf", Max: fmt.Sprint(now.Add(-timeout).UnixMilli()), Count: 100}).Result()
	if err != nil {
		return 0, fmt.Errorf("srq: recover flows: %w", err)
	}
	undone := 0
	var errs []error
	for _, fid := range stale {
		def := e.client.Get(ctx, e.keys.base+"fd:"+fid)
		nonce := e.client.HGet(ctx, e.keys.base+"f:"+fid, "N")
		if err := errors.Join(def.Err(), nonce.Err()); err != nil && !errors.Is(err, redis.Nil) {
			errs = append(errs, fmt.Errorf("srq: recover flow %s: %w", fid, err))
			continue
		}
		var d flowDef
		if def.Err() != nil || nonce.Err() != nil || json.Unmarshal([]byte(def.Val()), &d) != nil {
			// Its claim is gone (undone already) or unreadable: only the index entry is left.
			if err := e.client.ZRem(ctx, e.keys.base+"flowsp", fid).Err(); err != nil {
				errs = append(errs, fmt.Errorf("srq: recover flow %s: %w", fid, err))
			}
			continue
		}
		p := &flowPlan{spec: &FlowSpec{ID: fid}, engs: map[string]*Engine{}}
		written := map[string][]string{}
		p.bases = []string{e.keys.Base()}
		p.engs[e.keys.Base()] = e
		for _, s := range d.Steps {
			if _, ok := p.engs[s.Base]; !ok {
				p.bases = append(p.bases, s.Base)
				p.engs[s.Base] = e.at(s.Base)
			}
			written[s.Base] = append(written[s.Base], StepID(fid, s.Name))
		}
		committed, err := p.abort(ctx, written, nonce.Val())
		if err != nil {
			errs = append(errs, fmt.Errorf("srq: recover flow %s: %w", fid, err))
			continue
		}
		if !committed {
			undone++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return undone, err
	}
	return undone, nil
}

// FlowState is where a flow is in its life.
type FlowState string

// The states of a flow.
const (
	// FlowRunning is a flow with steps still to run.
	FlowRunning FlowState = "running"
	// FlowCompleted is a flow whose steps all succeeded.
	FlowCompleted FlowState = "completed"
	// FlowFailed is a flow with a failed (dead-lettered) or cancelled step; its other steps run
	// as their policies allow. A requeue of a failed step that is still a dead letter makes the
	// flow run again.
	FlowFailed FlowState = "failed"
	// FlowPublishing is a flow whose publish has not completed: none of its steps runs yet.
	FlowPublishing FlowState = "publishing"
)

var flowStates = map[string]FlowState{"": FlowRunning, "o": FlowCompleted, "x": FlowFailed, "p": FlowPublishing}

// FlowInfo is a flow as Flow reads it.
type FlowInfo struct {
	ID    string
	State FlowState
	// Created is when the flow was published; Ended when every step had ended (zero before).
	Created, Ended time.Time
	// Keep is how long the flow is kept after it ended.
	Keep time.Duration
	// Succeeded, Failed and FailedForGood count the steps that succeeded, that failed or were
	// cancelled, and of those the ones whose dead letter is gone or that were cancelled for good.
	Succeeded, Failed, FailedForGood int
	Steps                            []FlowStepInfo
}

// FlowStepInfo is one step of a flow as Flow reads it.
type FlowStepInfo struct {
	Name  string
	Queue string // the engine queue (the shard's, on a sharded queue)
	ID    string // the step's task id
	After []FlowEdge
	// State is where the step is: waiting, pending, leased, succeeded, dead or cancelled.
	State State
	// Ended is when the step ended, zero before.
	Ended time.Time
	// ResultLen is the length of the step's result, 0 for none.
	ResultLen int
	// Error is why the step failed or was cancelled.
	Error string
}

// Flow reads flow fid, whose home is e (its first step's queue or shard), with the state of
// every step: one call at the home and one per slot its steps live in (per 1,000 steps), and
// one more at the home to check that the flow's record did not change meanwhile. The state,
// counts and step states it returns are then one snapshot for the steps that live at the home,
// whose ends change the record in the same call; when the record changed, it reads the steps
// again (up to flowReads times in all, then returns the last reading). A step elsewhere may show
// its end before the record does: its end reaches the flow by a message. It fails with
// ErrNotFound when no such flow exists (never published, or past its retention on the server's
// clock, also before a recovery round deleted its keys), and with the context's or Redis's error.
func (e *Engine) Flow(ctx context.Context, fid string) (FlowInfo, error) {
	if err := validID(fid, false); err != nil {
		return FlowInfo{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	b := e.keys.base
	pipe := e.client.Pipeline()
	rec := pipe.HGetAll(ctx, b+"f:"+fid)
	steps := pipe.HGetAll(ctx, b+"fs:"+fid)
	def := pipe.Get(ctx, b+"fd:"+fid)
	clock := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return FlowInfo{}, fmt.Errorf("srq: flow %s: %w", fid, err)
	}
	if len(rec.Val()) == 0 {
		return FlowInfo{}, fmt.Errorf("%w: flow %s", ErrNotFound, fid)
	}
	// An ended flow past its retention is gone, whether or not a recovery round (flow_prune)
	// deleted its keys yet.
	if e := rec.Val()["e"]; e != "" && atoi64(e)+atoi64(rec.Val()["k"]) <= clock.Val().UnixMilli() {
		return FlowInfo{}, fmt.Errorf("%w: flow %s (its retention ended)", ErrNotFound, fid)
	}
	var d flowDef
	if err := json.Unmarshal([]byte(def.Val()), &d); err != nil {
		return FlowInfo{}, fmt.Errorf("srq: flow %s: its definition: %w", fid, err)
	}
	r, ended := rec.Val(), steps.Val()
	for read := 1; ; read++ {
		info, err := e.flowSteps(ctx, fid, &d, ended)
		if err != nil {
			return FlowInfo{}, err
		}
		pipe := e.client.Pipeline()
		again := pipe.HGetAll(ctx, b+"f:"+fid)
		againSteps := pipe.HGetAll(ctx, b+"fs:"+fid)
		if _, err := pipe.Exec(ctx); err != nil {
			return FlowInfo{}, fmt.Errorf("srq: flow %s: %w", fid, err)
		}
		now := again.Val()
		if len(now) == 0 { // it ended its retention meanwhile: the steps' reading stands alone
			now = r
		}
		if maps.Equal(now, r) || read == flowReads {
			info.State, info.Created, info.Ended = flowStates[r["S"]], msTime(atoi64(r["c"])), msTime(atoi64(r["e"]))
			info.Keep = time.Duration(atoi64(r["k"])) * time.Millisecond
			info.Succeeded, info.Failed, info.FailedForGood = int(atoi64(r["ok"])), int(atoi64(r["bad"])), int(atoi64(r["fin"]))
			return info, nil
		}
		r, ended = now, againSteps.Val()
	}
}

// flowReads bounds the readings of a flow's steps by Flow while its record keeps changing.
const flowReads = 5

// flowSteps reads the state of every step of flow fid, defined by d; ended is the flow's record
// of how its steps ended (the fs: hash), for the steps whose record and outcome are gone. It
// fills the returned FlowInfo's ID and Steps.
func (e *Engine) flowSteps(ctx context.Context, fid string, d *flowDef, ended map[string]string) (FlowInfo, error) {
	info := FlowInfo{ID: fid}
	info.Steps = make([]FlowStepInfo, len(d.Steps))
	byBase := map[string][]int{}
	var order []string
	for i, s := range d.Steps {
		st := FlowStepInfo{Name: s.Name, Queue: s.Queue, ID: StepID(fid, s.Name)}
		for _, a := range s.After {
			st.After = append(st.After, FlowEdge{Parent: a[0], Policy: policyNamed(a[1])})
		}
		info.Steps[i] = st
		if _, ok := byBase[s.Base]; !ok {
			order = append(order, s.Base)
		}
		byBase[s.Base] = append(byBase[s.Base], i)
	}
	for _, base := range order {
		idx := byBase[base]
		for lo := 0; lo < len(idx); lo += flowChunk {
			part := idx[lo:min(lo+flowChunk, len(idx))]
			ids := make([]string, len(part))
			for j, i := range part {
				ids[j] = info.Steps[i].ID
			}
			os, errs, err := e.at(base).outcomes(ctx, ids, true)
			if err != nil {
				return FlowInfo{}, err
			}
			for j, i := range part {
				st := &info.Steps[i]
				if errs[j] == nil {
					st.State, st.Ended, st.ResultLen, st.Error = os[j].State, os[j].Ended, os[j].ResultLen, os[j].Error
					continue
				}
				// Neither record nor outcome is left: the flow's record still knows how it ended.
				st.State = StateSucceeded
				if s := ended[st.Name]; s != "" && s[0] != 'o' {
					st.State = StateCancelled
				}
			}
		}
	}
	return info, nil
}

func policyNamed(s string) EdgePolicy {
	for _, p := range []EdgePolicy{FailDependents, ContinueDependents, IgnoreFailure} {
		if p.String() == s {
			return p
		}
	}
	return FailDependents
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Parent is one parent of a flow step, as the step's record keeps it.
type Parent struct {
	Name   string
	Policy EdgePolicy
	// State is what the step last heard of the parent: StateSucceeded, StateDead (failed),
	// StateCancelled, or StatePending while it has not ended.
	State State
	base  string
}

var parentStates = map[byte]State{'o': StateSucceeded, 'x': StateDead, 'X': StateDead, 'c': StateCancelled, 'C': StateCancelled}

// Parents returns the parents of flow step id (whose queue or shard is e), sorted by name, while
// the step has not ended. It fails with ErrNotFound when id is no flow step or has ended, and with
// the context's or Redis's error.
func (e *Engine) Parents(ctx context.Context, id string) ([]Parent, error) {
	m, err := e.client.HGetAll(ctx, e.keys.base+"fp:"+id).Result()
	if err != nil {
		return nil, fmt.Errorf("srq: parents of %s: %w", id, err)
	}
	if len(m) == 0 {
		// A first step of a flow written in one call has no parents to record.
		n, err := e.client.HExists(ctx, e.keys.Task(id), "F").Result()
		if err != nil {
			return nil, fmt.Errorf("srq: parents of %s: %w", id, err)
		}
		if !n {
			return nil, fmt.Errorf("%w: flow step %s", ErrNotFound, id)
		}
	}
	out := make([]Parent, 0, len(m))
	for name, v := range m {
		if name == "" { // the gate that held a first step until its flow's publish committed
			continue
		}
		p, ok := parseParent(name, v)
		if !ok {
			return nil, fmt.Errorf("srq: parents of %s: malformed entry %q", id, v)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Parent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// parseParent reads one entry of a step's parents (lua/includes/flow.lua).
func parseParent(name, v string) (Parent, bool) {
	if len(v) < 23 {
		return Parent{}, false
	}
	st, ok := parentStates[v[1]]
	if !ok {
		st = StatePending
	}
	return Parent{Name: name, Policy: EdgePolicy(v[0]), State: st, base: v[22:]}, true
}

// ParentOutcome returns the outcome of parent name of flow step id (whose queue or shard is e):
// its result when it succeeded. It fails with ErrNotFound when id is no flow step, has ended, or
// has no parent of that name, or the parent's outcome is no longer kept, and with the context's
// or Redis's error.
func (e *Engine) ParentOutcome(ctx context.Context, id, flowID, name string) (Outcome, error) {
	v, err := e.client.HGet(ctx, e.keys.base+"fp:"+id, name).Result()
	if errors.Is(err, redis.Nil) || name == "" {
		return Outcome{}, fmt.Errorf("%w: flow step %s has no parent %q", ErrNotFound, id, name)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("srq: parent %s of %s: %w", name, id, err)
	}
	p, ok := parseParent(name, v)
	if !ok {
		return Outcome{}, fmt.Errorf("srq: parents of %s: malformed entry %q", id, v)
	}
	return e.at(p.base).Outcome(ctx, StepID(flowID, name))
}
