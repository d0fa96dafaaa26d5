package inspect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// onShard returns a partition key of the form prefix<n> that shard i of b's queue holds.
func (b *bundle) onShard(prefix string, i int) partition.Key {
	b.t.Helper()
	for n := range 1000 {
		if p := partition.Key(fmt.Sprint(prefix, n)); engine.ShardOf(p, len(b.shards)) == i {
			return p
		}
	}
	b.t.Fatalf("no key %s<n> on shard %d", prefix, i)
	return ""
}

// TestTaskWaits: Task says what a task waits for, on a sharded queue: a parent its children (done
// out of total, each child with its queue, shard, state and policy), a signal with or without a
// time, a sleep of an unordered task (until its available-at) and of an ordered one (until its
// partition's block), a flow step its parents; a task whose sleep ended is pending, not waiting;
// a child names its parent and the parent's queue.
func TestTaskWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	p0, p1 := b.onShard("p", 0), b.onShard("p", 1)
	ord := b.onShard("!o", 1)
	b.publish(msg("parent", p0), msg("signal", p0), msg("parked", p1), msg("sleep", p1), msg("osleep", ord), msg("short", p0))
	byID := map[string]*engine.Delivery{}
	ds := b.fetchAll("w", time.Minute)
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	if len(byID) != 6 {
		t.Fatalf("fetched %d", len(byID))
	}
	// parent's children: a on shard 1 (fail), b on shard 0 (continue).
	if _, err := b.shards[1].Spawn(b.ctx, b.eng(p0), "parent", []engine.SpawnChild{{Name: "a", Message: engine.Message{Partition: p1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.shards[0].Spawn(b.ctx, b.eng(p0), "parent", []engine.SpawnChild{{Name: "b", Message: engine.Message{Partition: p0},
		Policy: engine.ContinueDependents}}); err != nil {
		t.Fatal(err)
	}
	reject := func(id string, delay time.Duration, w engine.Wait) {
		t.Helper()
		d := byID[id]
		res, err := b.eng(d.Partition).Reject(b.ctx, []engine.Rejection{{Receipt: d.Receipt(), Delay: delay, Wait: &w}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("wait %s: %v %+v", id, err, res)
		}
	}
	reject("parent", 0, engine.Wait{Kind: engine.WaitChildren})
	reject("signal", time.Hour, engine.Wait{Kind: engine.WaitSignal, Signal: "approve"})
	reject("parked", 0, engine.Wait{Kind: engine.WaitSignal, Signal: "go"})
	reject("sleep", time.Hour, engine.Wait{Kind: engine.WaitSleep})
	reject("osleep", 2*time.Hour, engine.Wait{Kind: engine.WaitSleep})
	reject("short", time.Millisecond, engine.Wait{Kind: engine.WaitSleep})
	// Child a succeeds: 1 of 2 done.
	kids, err := b.shards[1].Fetch(b.ctx, "w", 10, time.Minute)
	if err != nil || len(kids) != 1 || kids[0].ID != "parent/a" {
		t.Fatalf("fetch child a: %v %+v", err, kids)
	}
	if errs, err := b.shards[1].Ack(b.ctx, []engine.Receipt{kids[0].Receipt()}); err != nil || errs[0] != nil {
		t.Fatalf("ack child a: %v %v", err, errs)
	}
	if _, err := b.shards[1].Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.PublishFlow(b.ctx, &engine.FlowSpec{ID: "f", Steps: []engine.FlowStep{
		{Name: "s1", Engine: b.eng(p0), Message: engine.Message{Partition: p0}},
		{Name: "s2", Engine: b.eng(p0), Message: engine.Message{Partition: p0}, After: []engine.FlowEdge{{Parent: "s1"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// short's sleep of a millisecond ends: it is pending again, its last wait a sleep.
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, err := b.in.Task(b.ctx, b.queue, "short")
		if err != nil {
			t.Fatal(err)
		}
		if st.State == engine.StatePending && st.Wait == nil && st.Waited == engine.WaitSleep {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("short: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Once short runs again its sleep is over: sent back with a retry's delay, it is pending, not
	// sleeping.
	ds, err = b.eng(p0).Fetch(b.ctx, "w", 10, time.Minute) // short, child b and step s1
	i := slices.IndexFunc(ds, func(d engine.Delivery) bool { return d.ID == "short" })
	if err != nil || i < 0 {
		t.Fatalf("fetch short again: %v %+v", err, ds)
	}
	if res, err := b.eng(p0).Reject(b.ctx, []engine.Rejection{{Receipt: ds[i].Receipt(), Delay: time.Hour, Reason: "again"}}); err != nil || res[0].Err != nil {
		t.Fatalf("retry short: %v %+v", err, res)
	}
	if st, err := b.in.Task(b.ctx, b.queue, "short"); err != nil || st.State != engine.StatePending || st.Wait != nil ||
		st.Waited != 0 || st.LastError != "again" {
		t.Fatalf("short retried after its sleep: %+v %v", st, err)
	}

	task := func(id string) Task {
		t.Helper()
		tk, err := b.in.Task(b.ctx, b.queue, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return tk
	}
	near := func(got, want time.Time) bool { d := got.Sub(want); return d > -time.Minute && d < time.Minute }

	parent := task("parent")
	if parent.State != engine.StateWaiting || parent.Wait == nil ||
		*parent.Wait != (TaskWait{For: WaitForChildren, ChildrenDone: 1, ChildrenTotal: 2}) || len(parent.Children) != 2 ||
		parent.Children[0] != (TaskChild{Name: "a", ID: "parent/a", Queue: "q", Shard: 1, State: "succeeded", Policy: "fail"}) ||
		parent.Children[1] != (TaskChild{Name: "b", ID: "parent/b", Queue: "q", Shard: 0, State: ChildNotEnded, Policy: "continue"}) {
		t.Errorf("parent: %+v wait %+v children %+v", parent.TaskInfo, parent.Wait, parent.Children)
	}
	if kid := task("parent/b"); kid.Parent != "parent" || kid.ParentQueue != "q" || kid.Wait != nil || kid.Children != nil {
		t.Errorf("child b: parent %q in %q, wait %+v, children %+v", kid.Parent, kid.ParentQueue, kid.Wait, kid.Children)
	}
	if s := task("signal"); s.State != engine.StateWaiting || s.Wait == nil || s.Wait.For != WaitForSignal || s.Wait.Signal != "approve" ||
		!near(s.Wait.Until, now.Add(time.Hour)) || !s.Wait.Until.Equal(s.AvailableAt) {
		t.Errorf("signal with a time: %s %+v", s.State, s.Wait)
	}
	if s := task("parked"); s.State != engine.StateWaiting || s.Wait == nil ||
		*s.Wait != (TaskWait{For: WaitForSignal, Signal: "go"}) {
		t.Errorf("signal without a time: %s %+v", s.State, s.Wait)
	}
	if s := task("sleep"); s.State != engine.StateWaiting || s.Wait == nil || s.Wait.For != WaitForSleep ||
		!near(s.Wait.Until, now.Add(time.Hour)) {
		t.Errorf("sleep: %s %+v", s.State, s.Wait)
	}
	// An ordered task keeps its place: its available-at stays, its partition is blocked.
	if s := task("osleep"); s.State != engine.StateWaiting || s.Wait == nil || s.Wait.For != WaitForSleep ||
		!near(s.Wait.Until, now.Add(2*time.Hour)) || s.AvailableAt.After(now) {
		t.Errorf("ordered sleep: %s %+v, available at %v", s.State, s.Wait, s.AvailableAt)
	}
	if s := task("f/s2"); s.State != engine.StateWaiting || s.Wait == nil || *s.Wait != (TaskWait{For: WaitForParents}) ||
		s.Flow != "f" || s.FlowQueue != "q" {
		t.Errorf("flow step: %s %+v flow %q in %q", s.State, s.Wait, s.Flow, s.FlowQueue)
	}
}

// TestStatsHandedBack: Stats sums the tasks workers handed back over the shards, apart from
// rejected and taken back: an ordered hand-back on one shard counts the later task of its run it
// took back, an unordered one on the other counts itself.
func TestStatsHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	ord := b.onShard("!o", 0)
	p1 := b.onShard("p", 1)
	b.publish(msg("o1", ord), msg("o2", ord), msg("u1", p1))
	for i, e := range b.shards {
		ds, err := e.Fetch(b.ctx, "w", 10, time.Minute)
		if err != nil || len(ds) != 2-i {
			t.Fatalf("fetch shard %d: %v %d", i, err, len(ds))
		}
		// The first of each shard's run is handed back: o2 comes back with o1.
		res, err := e.Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), HandBack: true}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("hand back on shard %d: %v %+v", i, err, res)
		}
	}
	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	if s.HandedBack != 3 || s.Rejected != 0 || s.TakenBack != 0 || s.Pending != 3 {
		t.Fatalf("stats: handed back %d, rejected %d, taken back %d, pending %d; want 3, 0, 0, 3",
			s.HandedBack, s.Rejected, s.TakenBack, s.Pending)
	}
}

// TestWorkflowEvents: the events of dynamic workflows carry what they are about: a waiting task
// what it waits for (its children, or a signal and its name), a signal its name, a progress its
// value as JSON (a JSON value as it is, a msgpack one decoded, other bytes as a string), and a
// resumed task its partition.
func TestWorkflowEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.withEvents(1000)
	e := b.shards[0]
	b.publish(msg("kids", "p"), msg("sig", "p"))
	ds := b.fetchAll("w", time.Minute)
	if len(ds) != 2 {
		t.Fatalf("fetched %d", len(ds))
	}
	if _, err := e.Spawn(b.ctx, e, "kids", []engine.SpawnChild{{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]byte{[]byte(`{"n": 1}`), {0x81, 0xa1, 'n', 0x02}, []byte("\xc1 half")} {
		if err := e.Progress(b.ctx, ds[0].Receipt(), v); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), Wait: &engine.Wait{Kind: engine.WaitChildren}},
		{Receipt: ds[1].Receipt(), Wait: &engine.Wait{Kind: engine.WaitSignal, Signal: "go on"}}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("wait: %v %+v", err, res)
	}
	if taken, err := e.Signal(b.ctx, "sig", "go on", []byte("v")); err != nil || !taken {
		t.Fatalf("signal: %v %v", taken, err)
	}
	type ev struct{ kind, id, partition, wait, signal, progress string }
	var got []ev
	for _, x := range b.events(EventQuery{Limit: 100}).Events {
		if x.Kind == "published" {
			continue
		}
		got = append(got, ev{x.Kind, x.ID, x.Partition, x.Wait, x.Signal, string(x.Progress)})
	}
	want := []ev{
		{"progress", "kids", "", "", "", `{"n":1}`},
		{"progress", "kids", "", "", "", `{"n":2}`},
		{"progress", "kids", "", "", "", `"\ufffd half"`},
		{"waiting", "kids", "", WaitForChildren, "", ""},
		{"waiting", "sig", "", WaitForSignal, "go on", ""},
		{"resumed", "sig", "p", "", "", ""},
		{"signal", "sig", "", "", "go on", ""},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", got, want)
	}
	// In JSON a progress is its value, not a string, and null for another kind; it reads back.
	for _, x := range []Event{{Kind: "progress", Progress: `{"n":1}`}, {Kind: "acked"}} {
		js, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var back Event
		if err := json.Unmarshal(js, &back); err != nil || back != x ||
			(x.Progress != "" && !strings.Contains(string(js), `"progress":{"n":1}`)) ||
			(x.Progress == "" && !strings.Contains(string(js), `"progress":null`)) {
			t.Errorf("%+v: %s, back %+v (%v)", x, js, back, err)
		}
	}
}
