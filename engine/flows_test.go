package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// step is a FlowStep of b's engine with a payload of its name.
func (b *bundle) step(name string, after ...string) FlowStep {
	s := FlowStep{Name: name, Engine: b.eng, Message: Message{Payload: []byte(name)}}
	for _, a := range after {
		s.After = append(s.After, FlowEdge{Parent: a})
	}
	return s
}

// runOnce fetches what is ready and acks every task, with its name as result, except those
// fail names, which it kills; it returns the names of the steps it ran, sorted.
func (b *bundle) runOnce(fail ...string) []string {
	b.t.Helper()
	ds := b.fetch("c", 100)
	var names []string
	var acks []Receipt
	var kills []Failure
	for _, d := range ds {
		name := string(d.Payload)
		names = append(names, name)
		if slices.Contains(fail, name) {
			kills = append(kills, Failure{Receipt: d.Receipt(), Reason: name + " broke"})
			continue
		}
		r := d.Receipt()
		r.Result = []byte("result of " + name)
		acks = append(acks, r)
	}
	if len(acks) > 0 {
		errs, err := b.eng.Ack(b.ctx, acks)
		if err != nil || errors.Join(errs...) != nil {
			b.t.Fatalf("ack: %v %v", err, errs)
		}
	}
	if len(kills) > 0 {
		if _, err := b.eng.Kill(b.ctx, kills); err != nil {
			b.t.Fatalf("kill: %v", err)
		}
	}
	slices.Sort(names)
	return names
}

func (b *bundle) flow(id string) FlowInfo {
	b.t.Helper()
	f, err := b.eng.Flow(b.ctx, id)
	if err != nil {
		b.t.Fatalf("flow %s: %v", id, err)
	}
	return f
}

func TestFlowFanOutFanIn(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	// charge, then email, invoice and ship in parallel, then complete.
	spec := &FlowSpec{ID: "order-1", Steps: []FlowStep{
		b.step("charge"), b.step("email", "charge"), b.step("invoice", "charge"), b.step("ship", "charge"),
		b.step("complete", "email", "invoice", "ship"),
	}}
	if dup, err := PublishFlow(b.ctx, spec); err != nil || dup {
		t.Fatalf("PublishFlow: %v, duplicate %v", err, dup)
	}
	for i, want := range [][]string{{"charge"}, {"email", "invoice", "ship"}, {"complete"}, nil} {
		if got := b.runOnce(); !slices.Equal(got, want) {
			t.Fatalf("round %d ran %v, want %v", i, got, want)
		}
	}
	f := b.flow("order-1")
	if f.State != FlowCompleted || f.Succeeded != 5 || f.Ended.IsZero() {
		t.Fatalf("flow: %+v", f)
	}
	for _, s := range f.Steps {
		if s.State != StateSucceeded || s.ResultLen != len("result of "+s.Name) {
			t.Errorf("step %s: %+v", s.Name, s)
		}
	}
	o, err := b.eng.Outcome(b.ctx, StepID("order-1", "invoice"))
	if err != nil || string(o.Result) != "result of invoice" || o.State != StateSucceeded {
		t.Fatalf("outcome of invoice: %+v, %v", o, err)
	}
	if dup, err := PublishFlow(b.ctx, &FlowSpec{ID: "order-1", Steps: []FlowStep{b.step("x")}}); err != nil || !dup {
		t.Fatalf("publishing the id again: %v, duplicate %v", err, dup)
	}
	st, err := b.eng.Stats(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.FlowsStarted != 1 || st.FlowsCompleted != 1 || st.Waiting != 0 || st.Pending != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestFlowInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	cases := map[string][]FlowStep{
		"no steps":      nil,
		"unknown":       {b.step("a", "nope")},
		"self":          {b.step("a", "a")},
		"cycle":         {b.step("a", "c"), b.step("b", "a"), b.step("c", "b")},
		"duplicate":     {b.step("a"), b.step("a")},
		"slash":         {b.step("a/b")},
		"twice":         {b.step("a"), b.step("b", "a", "a")},
		"bad last step": {b.step("a"), b.step("b", "a"), {Name: "c", Engine: b.eng, Message: Message{Delay: -time.Second}}},
		"long name":     {b.step(strings.Repeat("n", MaxStepNameLen+1))},
	}
	other, err := New(b.server.Client(t), Config{Queue: b.eng.cfg.Queue + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	cases["another client"] = []FlowStep{b.step("a"), {Name: "b", Engine: other, Message: Message{Payload: []byte("b")},
		After: []FlowEdge{{Parent: "a"}}}}
	cases["id too long"] = []FlowStep{b.step("a")}
	for name, steps := range cases {
		id := "f-" + strings.ReplaceAll(name, " ", "-")
		if name == "id too long" {
			id = strings.Repeat("f", MaxIDLen-1) // with "/a", a task id one byte too long
		}
		_, err := PublishFlow(b.ctx, &FlowSpec{ID: id, Steps: steps})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	too := make([]FlowStep, MaxFlowSteps+1)
	for i := range too {
		too[i] = b.step(fmt.Sprint(i))
	}
	if _, err := PublishFlow(b.ctx, &FlowSpec{Steps: too}); !errors.Is(err, ErrInvalid) {
		t.Errorf("too many steps: %v", err)
	}
	if keys, _ := b.client.Keys(b.ctx, b.eng.keys.Base()+"*").Result(); len(keys) != 0 {
		t.Fatalf("an invalid flow wrote %v", keys)
	}
	// At the limits: a step name of MaxStepNameLen bytes, a task id of MaxIDLen.
	long := strings.Repeat("n", MaxStepNameLen)
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: strings.Repeat("f", MaxIDLen-1-len(long)), Steps: []FlowStep{b.step(long)}}); err != nil {
		t.Errorf("a flow at the limits: %v", err)
	}
}

func TestFlowPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy   EdgePolicy
		ran      []string // after a fails
		c        State    // what becomes of c
		cErr     string
		flowWhen FlowState
	}{
		{FailDependents, nil, StateCancelled, "parent a failed: a broke", FlowFailed},
		{ContinueDependents, []string{"c"}, StateSucceeded, "", FlowFailed},
		{IgnoreFailure, []string{"c"}, StateSucceeded, "", FlowFailed},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			c := b.step("c", "b")
			c.After = append(c.After, FlowEdge{Parent: "a", Policy: tc.policy})
			spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b"), c}}
			if _, err := PublishFlow(b.ctx, spec); err != nil {
				t.Fatal(err)
			}
			if got := b.runOnce("a"); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("first round ran %v", got)
			}
			if got := b.runOnce(); !slices.Equal(got, tc.ran) {
				t.Fatalf("after a failed, ran %v, want %v", got, tc.ran)
			}
			f := b.flow("f")
			if f.State != tc.flowWhen || f.Steps[2].State != tc.c || f.Steps[2].Error != tc.cErr {
				t.Fatalf("flow %s, c %+v; want %s, c %s %q", f.State, f.Steps[2], tc.flowWhen, tc.c, tc.cErr)
			}
		})
	}
}

// A fail dependent of a dead-lettered step is cancelled; a requeue of the dead letter reopens it,
// and the flow completes. Purging the dead letter instead cancels it for good.
func TestFlowRequeueResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	steps := []FlowStep{b.step("a"), b.step("b", "a"), b.step("c", "b")}
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	b.runOnce("a")
	// b is cancelled for now, and c behind it: every step counts as failed.
	if f := b.flow("f"); f.State != FlowFailed || f.Failed != 3 || f.FailedForGood != 0 ||
		f.Steps[1].State != StateCancelled || f.Steps[2].State != StateCancelled {
		t.Fatalf("after a died: %+v", f)
	}
	if errs, err := b.eng.Requeue(b.ctx, []string{StepID("f", "a")}); err != nil || errs[0] != nil {
		t.Fatalf("requeue: %v %v", err, errs)
	}
	if f := b.flow("f"); f.State != FlowRunning || f.Steps[1].State != StateWaiting {
		t.Fatalf("after the requeue: %+v", f)
	}
	for _, want := range []string{"a", "b", "c"} {
		if got := b.runOnce(); !slices.Equal(got, []string{want}) {
			t.Fatalf("ran %v, want %s", got, want)
		}
	}
	if f := b.flow("f"); f.State != FlowCompleted {
		t.Fatalf("flow: %+v", f)
	}

	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "g", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	b.runOnce("a")
	if _, err := b.eng.Purge(b.ctx, []string{StepID("g", "a")}); err != nil {
		t.Fatal(err)
	}
	f := b.flow("g")
	if f.State != FlowFailed || f.FailedForGood != 3 || f.Ended.IsZero() {
		t.Fatalf("after the purge: %+v", f)
	}
	for _, s := range f.Steps[1:] {
		if s.State != StateCancelled || !strings.Contains(s.Error, "failed") {
			t.Errorf("step %s: %+v", s.Name, s)
		}
	}
	if got := b.runOnce(); got != nil {
		t.Fatalf("ran %v after the flow failed for good", got)
	}
}

// Steps in another queue are released through the outbox and the relay.
func TestFlowAcrossQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	other, err := New(b.client, Config{Queue: b.eng.cfg.Queue + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	o := &bundle{t: t, ctx: b.ctx, client: b.client, eng: other}
	spec := &FlowSpec{ID: "x", Steps: []FlowStep{b.step("a"), o.step("b", "a"), b.step("c", "b")}}
	if _, err := PublishFlow(b.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := b.runOnce(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ran %v", got)
	}
	if got := o.runOnce(); got != nil {
		t.Fatalf("b ran before the relay: %v", got)
	}
	if n, err := b.eng.Relay(b.ctx); err != nil || n != 1 {
		t.Fatalf("relay: %d, %v", n, err)
	}
	if got := o.runOnce(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("other queue ran %v", got)
	}
	if n, err := other.Relay(b.ctx); err != nil || n != 2 { // c's release, and b's note to the home
		t.Fatalf("relay: %d, %v", n, err)
	}
	ps, err := b.eng.Parents(b.ctx, StepID("x", "c"))
	if err != nil || len(ps) != 1 || ps[0].Name != "b" || ps[0].State != StateSucceeded || ps[0].Policy != FailDependents {
		t.Fatalf("parents of c: %+v, %v", ps, err)
	}
	po, err := b.eng.ParentOutcome(b.ctx, StepID("x", "c"), "x", "b")
	if err != nil || string(po.Result) != "result of b" {
		t.Fatalf("c's parent b: %+v, %v", po, err)
	}
	if _, err := b.eng.ParentOutcome(b.ctx, StepID("x", "c"), "x", "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("c's parent a, which it has not: %v", err)
	}
	if got := b.runOnce(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("ran %v", got)
	}
	if f := b.flow("x"); f.State != FlowCompleted || f.Steps[1].Queue != other.cfg.Queue {
		t.Fatalf("flow: %+v", f)
	}
	// A relay repeated (a crash before the outbox was cleared) changes nothing.
	if _, err := b.eng.Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// A fan-in of 10,000 steps: the publish is written in parts, and the join runs once all are acked.
func TestFlowFanIn10000(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: a fan-in of 10,000 steps")
	}
	b := setupBig(t, Config{})
	n := b.server.Size(t, 10_000, 2000) // still more than one part of the publish
	steps := make([]FlowStep, 0, n+1)
	join := b.step("join")
	for i := range n {
		name := fmt.Sprint("s", i)
		steps = append(steps, b.step(name))
		join.After = append(join.After, FlowEdge{Parent: name})
	}
	steps = append(steps, join)
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "big", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for ran < n {
		ds, err := b.eng.Fetch(b.ctx, "c", 1000, time.Minute)
		if err != nil || len(ds) == 0 {
			t.Fatalf("fetch after %d: %d tasks, %v", ran, len(ds), err)
		}
		rs := make([]Receipt, len(ds))
		for i, d := range ds {
			if string(d.Payload) == "join" {
				t.Fatalf("join ran after %d of its parents", ran)
			}
			rs[i] = d.Receipt()
		}
		if _, err := b.eng.Ack(b.ctx, rs); err != nil {
			t.Fatal(err)
		}
		ran += len(ds)
	}
	// An ack applies up to 1,000 signals itself; a worker relays the rest, as here.
	if _, err := b.eng.Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.runOnce(); !slices.Equal(got, []string{"join"}) {
		t.Fatalf("after every parent: ran %v", got)
	}
	if f := b.flow("big"); f.State != FlowCompleted || f.Succeeded != n+1 {
		t.Fatalf("flow: %s, %d succeeded", f.State, f.Succeeded)
	}
}

// A publish whose publisher dies after its parts and before its commit is undone by
// RecoverFlows: nothing of it ever runs, and its id can be published again.
func TestFlowRecoverUnfinishedPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	other, err := New(b.client, Config{Queue: b.eng.cfg.Queue + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	o := &bundle{t: t, ctx: b.ctx, client: b.client, eng: other}
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), o.step("b")}}
	p, err := planFlow(spec)
	if err != nil {
		t.Fatal(err)
	}
	// The publisher's first calls: claim and the parts, no commit.
	if _, err := b.eng.run(b.ctx, scriptFlowPub, "claim", "f", 1000, p.def, "n1", "a", "b"); err != nil {
		t.Fatal(err)
	}
	for _, base := range p.bases {
		args := []any{"part", "f", 1000, b.eng.keys.Base()}
		for _, i := range p.groups[base] {
			args = p.stepArgs(args, i)
		}
		if _, err := p.engs[base].run(b.ctx, scriptFlowPub, args...); err != nil {
			t.Fatal(err)
		}
	}
	if got := append(b.runOnce(), o.runOnce()...); got != nil {
		t.Fatalf("an uncommitted flow ran %v", got)
	}
	if f := b.flow("f"); f.State != FlowPublishing {
		t.Fatalf("flow: %+v", f)
	}
	if n, err := b.eng.RecoverFlows(b.ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("RecoverFlows before the timeout: %d, %v", n, err)
	}
	if n, err := b.eng.RecoverFlows(b.ctx, 0); err != nil || n != 1 {
		t.Fatalf("RecoverFlows: %d, %v", n, err)
	}
	if res, err := b.eng.run(b.ctx, scriptFlowPub, "commit", "f", "n1", b.eng.keys.Base()); err != nil || res != int64(codeAborted) {
		t.Fatalf("a late commit: %v, %v", res, err)
	}
	for _, e := range []*Engine{b.eng, other} {
		if keys, _ := b.client.Keys(b.ctx, e.keys.Base()+"*").Result(); len(keys) > 0 && !onlyStats(keys) {
			t.Fatalf("left behind: %v", keys)
		}
	}
	if _, err := PublishFlow(b.ctx, spec); err != nil {
		t.Fatalf("publishing it again: %v", err)
	}
	b.runOnce()
	o.runOnce()
	b.eng.Relay(b.ctx)
	other.Relay(b.ctx)
	if f := b.flow("f"); f.State != FlowCompleted {
		t.Fatalf("flow: %+v", f)
	}
}

// onlyStats says whether keys are only the counters a queue keeps for good.
func onlyStats(keys []string) bool {
	for _, k := range keys {
		if !strings.HasSuffix(k, ":stats") && !strings.HasSuffix(k, ":seq") && !strings.HasSuffix(k, ":consumers") {
			return false
		}
	}
	return true
}

// Cancelling a waiting step cancels its fail dependents for good, and the flow fails; a
// continue dependent runs.
func TestFlowCancelStep(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	d := b.step("d")
	d.After = []FlowEdge{{Parent: "b", Policy: ContinueDependents}}
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a"), b.step("c", "b"), d}}
	if _, err := PublishFlow(b.ctx, spec); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Cancel(b.ctx, []string{StepID("f", "b")}, "not wanted")
	if err != nil || res[0].Err != nil || res[0].Running {
		t.Fatalf("Cancel: %+v, %v", res, err)
	}
	if got := b.runOnce(); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("ran %v", got)
	}
	f := b.flow("f")
	if f.State != FlowFailed || f.Steps[1].State != StateCancelled || f.Steps[1].Error != "not wanted" ||
		f.Steps[2].State != StateCancelled || !strings.Contains(f.Steps[2].Error, "parent b failed: not wanted") ||
		f.Ended.IsZero() {
		t.Fatalf("flow: %+v", f)
	}
}

// Publishing a flow again while its steps still exist is a duplicate, not a conflict.
func TestFlowDuplicateWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	spec := func() *FlowSpec { return &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a")}} }
	if _, err := PublishFlow(b.ctx, spec()); err != nil {
		t.Fatal(err)
	}
	if dup, err := PublishFlow(b.ctx, spec()); err != nil || !dup {
		t.Fatalf("again: duplicate %v, %v", dup, err)
	}
}

// TestUnreleasedStepHasNoAvailableAt: a flow step its parents have not released has no
// available-at yet: Task reports the zero time, not the Unix epoch its record's 0 stands for,
// also once a failed parent holds it cancelled.
func TestUnreleasedStepHasNoAvailableAt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if dup, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a")}}); err != nil || dup {
		t.Fatalf("publish: %v %v", dup, err)
	}
	check := func(when string) {
		t.Helper()
		info, err := b.eng.Task(b.ctx, StepID("f", "b"))
		if err != nil || !info.AvailableAt.IsZero() {
			t.Fatalf("%s: the step's available-at %v, %v; want the zero time", when, info.AvailableAt, err)
		}
	}
	check("waiting for its parent")
	b.runOnce("a")
	check("held cancelled by its failed parent")
	// Held, it has no end either (a requeue of its parent runs it again).
	if st := b.flow("f").Steps[1]; st.State != StateCancelled || !st.Ended.IsZero() {
		t.Fatalf("the held step in Flow: %+v; want cancelled with no end", st)
	}
}
