package engine

import (
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestTaskWorkflowFields: Task reads what a dynamic workflow keeps in a task's record: a parent
// waiting for its children (with their counts, its progress and its kept state), a child's parent
// in another queue and in its own, a sleep and a signal wait, a flow step's flow and its parents'
// counts, which are not children. Every field of each record is compared.
func TestTaskWorkflowFields(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	other, err := New(b.client, Config{Queue: b.eng.cfg.Queue + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(Message{ID: "parent"}, Message{ID: "sleeper", Partition: "!o"}, Message{ID: "waiter"}, Message{ID: "failed"})
	ds := b.fetch("w", 4)
	if len(ds) != 4 {
		t.Fatalf("fetched %d", len(ds))
	}
	byID := map[string]*Delivery{}
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	if _, err := other.Spawn(b.ctx, b.eng, "parent", []SpawnChild{{Name: "a"}, {Name: "b", Policy: ContinueDependents}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Spawn(b.ctx, b.eng, "parent", []SpawnChild{{Name: "here"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Spawn(b.ctx, b.eng, "failed", []SpawnChild{{Name: "x", Message: Message{Partition: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Progress(b.ctx, byID["parent"].Receipt(), []byte("half")); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Reject(b.ctx, []Rejection{
		{Receipt: byID["parent"].Receipt(), Wait: &Wait{Kind: WaitChildren, State: []byte("st")}},
		{Receipt: byID["sleeper"].Receipt(), Delay: time.Hour, Wait: &Wait{Kind: WaitSleep}},
		{Receipt: byID["waiter"].Receipt(), Wait: &Wait{Kind: WaitSignal, Signal: "go ahead"}},
		{Receipt: byID["failed"].Receipt(), Wait: &Wait{Kind: WaitChildren}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("reject %d: %v", i, r.Err)
		}
	}
	// parent's child a succeeds (2 of its 3 are left); failed's child x dies, which ends its wait.
	kids, err := other.Fetch(b.ctx, "w", 3, time.Minute)
	if err != nil || len(kids) != 3 {
		t.Fatalf("fetch the children: %v %d", err, len(kids))
	}
	for _, k := range kids {
		switch k.ID {
		case "parent/a":
			if errs, err := other.Ack(b.ctx, []Receipt{k.Receipt()}); err != nil || errs[0] != nil {
				t.Fatalf("ack a child: %v %v", err, errs)
			}
		case "failed/x":
			if errs, err := other.Kill(b.ctx, []Failure{{Receipt: k.Receipt(), Reason: "no"}}); err != nil || errs[0] != nil {
				t.Fatalf("kill a child: %v %v", err, errs)
			}
		}
	}
	if _, err := other.Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: []FlowStep{b.step("s1"), b.step("s2", "s1")}}); err != nil {
		t.Fatal(err)
	}

	// Only the workflow fields and the state are compared: the others are the tests' of Task.
	type wf struct {
		State                            State
		Waited                           WaitKind
		WaitedSignal                     string
		HasWorkflow                      bool
		ChildrenNotEnded, FailedChildren int
		Progress, KeptState              string
		Parent, ParentQueue              string
		Flow, FlowQueue                  string
	}
	q := b.eng.cfg.Queue
	for _, tt := range []struct {
		eng  *Engine
		id   string
		want wf
	}{
		{b.eng, "parent", wf{State: StateWaiting, Waited: WaitChildren, HasWorkflow: true, ChildrenNotEnded: 2, Progress: "half", KeptState: "st"}},
		{b.eng, "failed", wf{State: StatePending, HasWorkflow: true, FailedChildren: 1}}, // its wait ended
		{other, "parent/b", wf{State: StateLeased, Parent: "parent", ParentQueue: q}},
		{b.eng, "parent/here", wf{State: StatePending, Parent: "parent", ParentQueue: q}},
		{b.eng, "sleeper", wf{State: StatePending, Waited: WaitSleep}},
		{b.eng, "waiter", wf{State: StateWaiting, Waited: WaitSignal, WaitedSignal: "go ahead", HasWorkflow: true}},
		{b.eng, "f/s1", wf{State: StatePending, Flow: "f", FlowQueue: q}},
		{b.eng, "f/s2", wf{State: StateWaiting, Flow: "f", FlowQueue: q}}, // R counts its parent: not a child
	} {
		ti, err := tt.eng.Task(b.ctx, tt.id)
		if err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		got := wf{ti.State, ti.Waited, ti.WaitedSignal, ti.HasWorkflow, ti.ChildrenNotEnded, ti.FailedChildren,
			string(ti.Progress), string(ti.KeptState), ti.Parent, ti.ParentQueue, ti.Flow, ti.FlowQueue}
		if got != tt.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.id, got, tt.want)
		}
	}
	if ti, err := b.eng.Task(b.ctx, "parent"); err != nil || ti.Progress == nil || ti.KeptState == nil {
		t.Fatalf("parent: %+v %v", ti, err)
	}
	// A field Task does not know is ignored.
	if err := b.client.HSet(b.ctx, b.eng.keys.Task("sleeper"), "Q", "?").Err(); err != nil {
		t.Fatal(err)
	}
	if ti, err := b.eng.Task(b.ctx, "sleeper"); err != nil || ti.Progress != nil || ti.KeptState != nil || ti.Partition != partition.Key("!o") {
		t.Fatalf("a task without progress or state: %+v %v", ti, err)
	}
}
