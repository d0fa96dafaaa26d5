package inspect

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// step is a flow step on the shard of b's queue that holds partition p (or on eng when set), with
// its name as payload.
func (b *bundle) step(name string, p partition.Key, eng *engine.Engine, after ...engine.FlowEdge) engine.FlowStep {
	if eng == nil {
		eng = b.eng(p)
	}
	return engine.FlowStep{Name: name, Engine: eng, Message: engine.Message{Partition: p, Payload: []byte(name)}, After: after}
}

// runSteps fetches what is ready on engs and acks every task with its name as its result, except
// those named in fail, which it kills with "<name> broke"; it returns the names it ran, sorted.
func (b *bundle) runSteps(engs []*engine.Engine, fail ...string) []string {
	b.t.Helper()
	var names []string
	for _, e := range engs {
		ds, err := e.Fetch(b.ctx, "runner", 100, 60e9)
		if err != nil {
			b.t.Fatal(err)
		}
		var acks []engine.Receipt
		var kills []engine.Failure
		for _, d := range ds {
			name := string(d.Payload)
			names = append(names, name)
			if slices.Contains(fail, name) {
				kills = append(kills, engine.Failure{Receipt: d.Receipt(), Reason: name + " broke"})
				continue
			}
			r := d.Receipt()
			r.Result = []byte("result of " + name)
			acks = append(acks, r)
		}
		if errs, err := e.Ack(b.ctx, acks); err != nil || errors.Join(errs...) != nil {
			b.t.Fatalf("ack: %v %v", err, errs)
		}
		if errs, err := e.Kill(b.ctx, kills); err != nil || errors.Join(errs...) != nil {
			b.t.Fatalf("kill: %v %v", err, errs)
		}
		if _, err := e.Relay(b.ctx); err != nil {
			b.t.Fatal(err)
		}
	}
	slices.Sort(names)
	return names
}

// TestFlowRead publishes the order pipeline over a queue of three shards and a second queue, runs
// it with the e-mail failing, and reads it back: every step's queue and shard, state, parents
// with their policies, level, result length and error; the flow's state and counts; the stats'
// flow counters.
func TestFlowRead(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	mail, err := engine.New(b.client, engine.Config{Queue: "mail", Prefix: b.prefix})
	if err != nil {
		t.Fatal(err)
	}
	fail := func(p string) engine.FlowEdge { return engine.FlowEdge{Parent: p} }
	spec := &engine.FlowSpec{ID: "order-7", Steps: []engine.FlowStep{
		b.step("charge", "!cust-7", nil),
		b.step("email", "", mail, fail("charge")),
		b.step("invoice", "inv", nil, engine.FlowEdge{Parent: "charge", Policy: engine.ContinueDependents}),
		b.step("ship", "!wh", nil, engine.FlowEdge{Parent: "charge", Policy: engine.IgnoreFailure}),
		b.step("complete", "", nil, fail("email"), fail("invoice"), fail("ship")),
	}}
	if _, err := engine.PublishFlow(b.ctx, spec); err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(b.shards), mail)
	var ran []string
	for range 10 {
		got := b.runSteps(all, "email")
		if len(got) == 0 {
			break
		}
		ran = append(ran, got...)
	}
	if slices.Sort(ran); !slices.Equal(ran, []string{"charge", "email", "invoice", "ship"}) {
		t.Fatalf("ran %v", ran)
	}
	f, err := b.in.Flow(b.ctx, b.queue, "order-7")
	if err != nil {
		t.Fatal(err)
	}
	home := engine.ShardOf("!cust-7", 3)
	if f.ID != "order-7" || f.Queue != b.queue || f.Shard != home || f.State != "failed" || f.Succeeded != 3 ||
		f.Failed != 2 || f.Created.IsZero() || f.Ended.IsZero() || !f.Expires.After(f.Ended) || len(f.Steps) != 5 {
		t.Fatalf("flow %+v", f)
	}
	type want struct {
		queue   string
		shard   int
		state   string
		level   int
		result  int
		err     string
		parents string
	}
	wants := map[string]want{
		"charge":   {b.queue, home, "succeeded", 0, len("result of charge"), "", ""},
		"email":    {"mail", 0, "dead", 1, 0, "email broke", "charge:fail"},
		"invoice":  {b.queue, engine.ShardOf("inv", 3), "succeeded", 1, len("result of invoice"), "", "charge:continue"},
		"ship":     {b.queue, engine.ShardOf("!wh", 3), "succeeded", 1, len("result of ship"), "", "charge:ignore"},
		"complete": {b.queue, engine.ShardOf("", 3), "cancelled", 2, 0, "email broke", "email:fail,invoice:fail,ship:fail"},
	}
	for i, s := range f.Steps {
		w := wants[s.Name]
		parents := ids(s.Parents, func(e FlowEdge) string { return e.Parent + ":" + e.Policy })
		if s.Name != spec.Steps[i].Name || s.ID != "order-7/"+s.Name || s.Queue != w.queue || s.Shard != w.shard ||
			s.State != w.state || s.Level != w.level || s.ResultBytes != w.result || parents != w.parents {
			t.Errorf("step %d: %+v (parents %s), want %+v", i, s, parents, w)
		}
		if w.err != "" && !strings.Contains(s.Error, w.err) {
			t.Errorf("step %s: error %q, want it to hold %q", s.Name, s.Error, w.err)
		}
	}

	// complete is cancelled while email's dead letter may be requeued: it still counts as waiting.
	st, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || st.FlowsStarted != 1 || st.FlowsFailed != 1 || st.FlowsCompleted != 0 || st.Cancelled != 0 ||
		st.RunningFlows != 0 || st.EndedFlows != 1 || st.Waiting != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}

	if _, err := b.in.Flow(b.ctx, b.queue, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown flow: %v", err)
	}
	if _, err := b.in.Flow(b.ctx, b.queue, ""); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("empty id: %v", err)
	}
}

// TestFlowsList lists running and ended flows of a queue of three shards, paged, and checks every
// flow is listed once, in order, with its counts; a waiting step shows in the stats.
func TestFlowsList(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	const n = 9
	for i := range n {
		p := partition.Key(fmt.Sprintf("p%d", i))
		spec := &engine.FlowSpec{ID: fmt.Sprintf("f%d", i), Steps: []engine.FlowStep{
			b.step("a", p, nil), b.step("b", p, nil, engine.FlowEdge{Parent: "a"}),
		}}
		if _, err := engine.PublishFlow(b.ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || st.Waiting != n || st.RunningFlows != n || st.FlowsStarted != n || st.Pending != n {
		t.Fatalf("stats %+v, %v", st, err)
	}
	list := func(ended bool, limit int) []FlowSummary {
		t.Helper()
		var out []FlowSummary
		for off := 0; ; off += limit {
			page, err := b.in.Flows(b.ctx, b.queue, FlowQuery{Ended: ended, Page: Page{Offset: off, Limit: limit}})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Flows) > limit {
				t.Fatalf("page of %d, limit %d", len(page.Flows), limit)
			}
			out = append(out, page.Flows...)
			if len(page.Flows) < limit {
				return out
			}
		}
	}
	running := list(false, 2)
	if len(running) != n {
		t.Fatalf("listed %d running flows, want %d: %+v", len(running), n, running)
	}
	seen := map[string]bool{}
	for i, f := range running {
		if seen[f.ID] || f.State != "running" || f.Steps != 2 || f.Shard != engine.ShardOf(partition.Key("p"+f.ID[1:]), 3) {
			t.Fatalf("flow %d: %+v (seen %v)", i, f, seen[f.ID])
		}
		seen[f.ID] = true
		if i > 0 && f.Created.After(running[i-1].Created) {
			t.Fatalf("not newest first: %+v after %+v", f, running[i-1])
		}
	}
	b.runSteps(b.shards)
	b.runSteps(b.shards)
	if r := list(false, 4); len(r) != 0 {
		t.Fatalf("running after the flows ended: %+v", r)
	}
	ended := list(true, 4)
	if len(ended) != n {
		t.Fatalf("listed %d ended flows, want %d", len(ended), n)
	}
	for _, f := range ended {
		if f.State != "completed" || f.Succeeded != 2 || f.Ended.IsZero() || !f.Expires.After(f.Ended) {
			t.Fatalf("ended flow %+v", f)
		}
	}
	page, err := b.in.Flows(b.ctx, b.queue, FlowQuery{Ended: true, Page: Page{Limit: 1}})
	if err != nil || page.Total != n || len(page.Flows) != 1 {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	for _, bad := range []Page{{Offset: -1}, {Limit: MaxLimit + 1}, {Offset: MaxOffset}} {
		if _, err := b.in.Flows(b.ctx, b.queue, FlowQuery{Page: bad}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("page %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestSetLevels(t *testing.T) {
	t.Parallel()
	edge := func(ps ...string) []FlowEdge {
		out := make([]FlowEdge, len(ps))
		for i, p := range ps {
			out[i] = FlowEdge{Parent: p}
		}
		return out
	}
	// d is two steps after a through b, and one after it directly: its level is the longest path.
	steps := []FlowStep{
		{Name: "d", Parents: edge("a", "b")}, {Name: "a"}, {Name: "b", Parents: edge("a")},
		{Name: "e"}, {Name: "c", Parents: edge("d", "e")},
	}
	setLevels(steps)
	got := ids(steps, func(s FlowStep) string { return fmt.Sprintf("%s%d", s.Name, s.Level) })
	if got != "d2,a0,b1,e0,c3" {
		t.Fatalf("levels %s", got)
	}
}

func TestSplitShardQueue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in    string
		queue string
		shard int
	}{
		{"orders", "orders", 0},
		{engine.ShardQueue("orders", 8, 5), "orders", 5},
		{"odd#x.1", "odd#x.1", 0},
	} {
		if q, i := splitShardQueue(tt.in); q != tt.queue || i != tt.shard {
			t.Errorf("splitShardQueue(%q) = %q, %d; want %q, %d", tt.in, q, i, tt.queue, tt.shard)
		}
	}
}
