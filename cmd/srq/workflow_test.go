package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// seedWorkflow makes, in the fixture's queue q (and kids, for children of another queue), what
// dynamic workflows leave in tasks: parent, waiting for its children a (in kids, pending) and b
// (in q, succeeded), with a JSON progress and a kept state; sleeper, sleeping an hour; waiter, parked
// until the signal "approve". eng writes the tasks (it may keep an event stream); ids are prefixed
// with prefix.
func seedWorkflow(t *testing.T, f *fixture, eng *engine.Engine, prefix string, progress []byte, signal string) {
	t.Helper()
	kids, err := engine.New(f.client, engine.Config{Queue: "kids", Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	parent, sleeper, waiter := prefix+"parent", prefix+"sleeper", prefix+"waiter"
	if _, err := eng.Publish(f.ctx, []engine.Message{{ID: parent, Partition: "w", Payload: []byte(`{"order":7}`)},
		{ID: sleeper, Partition: "w"}, {ID: waiter, Partition: "w"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := eng.Fetch(f.ctx, "w1", 3, time.Hour)
	if err != nil || len(ds) != 3 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := kids.Spawn(f.ctx, eng, parent, []engine.SpawnChild{{Name: "a", Message: engine.Message{Partition: "k"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Spawn(f.ctx, eng, parent, []engine.SpawnChild{{Name: "b", Message: engine.Message{Partition: "k"},
		Policy: engine.ContinueDependents}}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Progress(f.ctx, ds[0].Receipt(), progress); err != nil {
		t.Fatal(err)
	}
	res, err := eng.Reject(f.ctx, []engine.Rejection{
		{Receipt: ds[0].Receipt(), Wait: &engine.Wait{Kind: engine.WaitChildren, State: []byte("12345")}},
		{Receipt: ds[1].Receipt(), Delay: time.Hour, Wait: &engine.Wait{Kind: engine.WaitSleep}},
		{Receipt: ds[2].Receipt(), Wait: &engine.Wait{Kind: engine.WaitSignal, Signal: signal}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("wait %d: %v", i, r.Err)
		}
	}
	b, err := eng.Fetch(f.ctx, "w1", 1, time.Hour)
	if err != nil || len(b) != 1 || b[0].ID != parent+"/b" {
		t.Fatalf("fetch child b: %v %+v", err, b)
	}
	if errs, err := eng.Ack(f.ctx, []engine.Receipt{b[0].Receipt()}); err != nil || errs[0] != nil {
		t.Fatalf("ack child b: %v %v", err, errs)
	}
}

// TestTaskShowsWorkflow: srq task shows what a waiting task waits for (its children done out of
// total, a signal, a sleep and until when), its progress decoded, whether it keeps a state, its
// children with their queue, state and policy, and a child's parent with its queue; --json has the
// same.
func TestTaskShowsWorkflow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seedWorkflow(t, f, f.eng, "", []byte(`{"done": 1, "of": 2}`), "approve")
	f.golden("task_parent", f.ok("", "--queue", "q", "task", "parent"))
	f.golden("task_child", f.ok("", "--queue", "kids", "task", "parent/a"))
	f.golden("task_sleeping", f.ok("", "--queue", "q", "task", "sleeper"))
	f.golden("task_signal", f.ok("", "--queue", "q", "task", "waiter"))

	p := decodeStrict[TaskJSON](t, f.ok("", "--queue", "q", "--json", "task", "parent"))
	if p.State != "waiting" || p.Wait == nil || *p.Wait != (inspect.TaskWait{For: "children", ChildrenDone: 1, ChildrenTotal: 2}) ||
		len(p.Children) != 2 || p.Children[0] != (inspect.TaskChild{Name: "a", ID: "parent/a", Queue: "kids", State: inspect.ChildNotEnded, Policy: "fail"}) ||
		p.Children[1].State != "succeeded" || string(p.Progress) != `{"done": 1, "of": 2}` || !p.KeptState ||
		p.KeptStateBytes != 5 || p.Parent != "" {
		t.Errorf("parent --json: %+v", p)
	}
	b := decodeStrict[TaskJSON](t, f.ok("", "--queue", "kids", "--json", "task", "parent/a"))
	if b.Parent != "parent" || b.ParentQueue != "q" || b.Wait != nil || b.Progress != nil || b.KeptState || len(b.Children) != 0 {
		t.Errorf("child a --json: %+v", b)
	}
	s := decodeStrict[TaskJSON](t, f.ok("", "--queue", "q", "--json", "task", "sleeper"))
	if s.State != "waiting" || s.Wait == nil || s.Wait.For != "sleep" || !s.Wait.Until.Equal(s.AvailableAt) || s.Wait.Until.Before(time.Now()) {
		t.Errorf("sleeper --json: %+v %+v", s, s.Wait)
	}
	w := decodeStrict[TaskJSON](t, f.ok("", "--queue", "q", "--json", "task", "waiter"))
	if w.State != "waiting" || w.Wait == nil || *w.Wait != (inspect.TaskWait{For: "signal", Signal: "approve"}) {
		t.Errorf("waiter --json: %+v %+v", w, w.Wait)
	}

	// A flow step waiting for its parents names its flow.
	step := func(name string, after ...engine.FlowEdge) engine.FlowStep {
		return engine.FlowStep{Name: name, Engine: f.eng, Message: engine.Message{Partition: "f"}, After: after}
	}
	if _, err := engine.PublishFlow(f.ctx, &engine.FlowSpec{ID: "fl", Steps: []engine.FlowStep{step("one"),
		step("two", engine.FlowEdge{Parent: "one"})}}); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("", "--queue", "q", "task", "fl/two"); !strings.Contains(out, "\nwaits for       parents (flow step)\n") ||
		!strings.Contains(out, "\nflow            fl of queue q\n") {
		t.Errorf("a waiting flow step:\n%s", out)
	}
	st := decodeStrict[TaskJSON](t, f.ok("", "--queue", "q", "--json", "task", "fl/two"))
	if st.Flow != "fl" || st.FlowQueue != "q" || st.Wait == nil || st.Wait.For != "parents" {
		t.Errorf("a waiting flow step --json: %+v %+v", st, st.Wait)
	}
}

// TestTaskWorkflowEscapes: a child's name, a signal's name and a progress that hold escape
// sequences and a right-to-left override are shown escaped by srq task, and as \u escapes by
// srq task --json, which decode to them.
func TestTaskWorkflowEscapes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const evil = "\x1b]0;pwned\x07\u202e"
	seedWorkflow(t, f, f.eng, evil, []byte(`"`+evil+`"`), "s"+evil)
	kid, err := engine.New(f.client, engine.Config{Queue: "kids", Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Publish(f.ctx, []engine.Message{{ID: "p2", Partition: partition.Key("w")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kid.Spawn(f.ctx, f.eng, "p2", []engine.SpawnChild{{Name: "c" + evil}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--queue", "q", "task", evil + "parent"},
		{"--queue", "q", "task", evil + "waiter"},
		{"--queue", "q", "task", "p2"},
		{"--queue", "kids", "task", "p2/c" + evil},
	} {
		out := f.ok("", args...)
		if hasControl(out) || !strings.Contains(out, `\x1b]0;pwned\a\u202e`) {
			t.Errorf("srq %q shows a control character raw, or not at all:\n%s", args, out)
		}
		out = f.ok("", append([]string{"--json"}, args...)...)
		var tj TaskJSON
		if err := json.Unmarshal([]byte(out), &tj); hasControl(out) || err != nil || !strings.Contains(out, `\u001b]0;pwned\u0007\u202e`) {
			t.Errorf("srq --json %q: %v:\n%s", args, err, out)
		}
	}
}

// TestEventsWorkflowKinds: srq events prints what the events of dynamic workflows carry: a
// waiting task what it waits for, a signal its name, a progress its value as JSON, a resumed task
// its partition; --json has them as wait, signal and progress. Hostile names and values come out
// escaped.
func TestEventsWorkflowKinds(t *testing.T) {
	t.Parallel()
	f, eng := eventsFixture(t)
	const evil = "\x1b]0;pwned\x07\u202e"
	// The progress is JSON whose string holds escaped controls and a raw right-to-left override.
	seedWorkflow(t, f, eng, "", []byte(`{"done":"1\u001b]0;pwned\u0007`+"\u202e"+`"}`), "approve "+evil)
	if taken, err := eng.Signal(f.ctx, "waiter", "approve "+evil, []byte("yes")); err != nil || !taken {
		t.Fatalf("signal: %v %v", taken, err)
	}
	out := f.ok("", "--queue", "ev", "events", "--limit", "50")
	if hasControl(out) {
		t.Errorf("events wrote a control character:\n%s", out)
	}
	find := func(kind, id string) string {
		t.Helper()
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[1] == kind && f[2] == id {
				return l
			}
		}
		t.Fatalf("no %s event of %s:\n%s", kind, id, out)
		return ""
	}
	for _, c := range []struct{ kind, id, want string }{
		{"progress", "parent", `  progress={"done":"1\u001b]0;pwned\u0007\u202e"}`},
		{"waiting", "parent", "  wait=children"},
		{"waiting", "waiter", `  wait=signal  signal="approve \x1b]0;pwned\a\u202e"`},
		{"signal", "waiter", `  signal="approve \x1b]0;pwned\a\u202e"`},
		{"resumed", "waiter", "  partition=w"},
	} {
		if l := find(c.kind, c.id); !strings.HasSuffix(l, c.want) {
			t.Errorf("%s of %s: %q, want it to end with %q", c.kind, c.id, l, c.want)
		}
	}

	js := f.ok("", "--queue", "ev", "--json", "events", "--limit", "50")
	if hasControl(js) {
		t.Errorf("events --json wrote a control character:\n%s", js)
	}
	seen := map[string]jsonEvent{}
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		ev := decodeStrict[jsonEvent](t, l)
		seen[ev.Kind+" "+ev.ID] = ev
	}
	var progress struct{ Done string }
	if ev := seen["progress parent"]; json.Unmarshal(ev.Progress, &progress) != nil || progress.Done != "1"+evil || ev.Wait != "" {
		t.Errorf("progress --json: %+v (%s)", ev, ev.Progress)
	}
	if ev := seen["waiting waiter"]; ev.Wait != "signal" || ev.Signal != "approve "+evil || string(ev.Progress) != "null" {
		t.Errorf("waiting --json: %+v", ev)
	}
	if ev := seen["waiting parent"]; ev.Wait != "children" || ev.Signal != "" {
		t.Errorf("waiting --json: %+v", ev)
	}
}
