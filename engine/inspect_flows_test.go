package engine

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// The operator reads of inspect_flows.go: the flow lists and their records, the extra counters,
// the held partitions with their time, the newest events and the announced stream; and the key
// names they read are the ones the scripts write.
func TestInspectFlowReads(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Events: 100})
	k := b.eng.Keys()
	for _, id := range []string{"f-ok", "f-bad", "f-run"} {
		spec := &FlowSpec{ID: id, Keep: time.Hour, Steps: []FlowStep{b.step(id + "-a"), b.step(id+"-b", id+"-a")}}
		if _, err := PublishFlow(b.ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	// f-ok's and f-bad's steps run (f-bad's first one dies, cancelling its second); f-run's first
	// step is left pending.
	ds := b.fetch("c", 10)
	var acks []Receipt
	for _, d := range ds {
		switch string(d.Payload) {
		case "f-ok-a":
			acks = append(acks, d.Receipt())
		case "f-bad-a":
			if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: d.Receipt(), Reason: "broke"}}); err != nil {
				t.Fatal(err)
			}
		default:
			rs := []Rejection{{Receipt: d.Receipt(), NotAttempt: true}}
			if _, err := b.eng.Reject(b.ctx, rs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.eng.Ack(b.ctx, acks); err != nil {
		t.Fatal(err)
	}
	for _, d := range b.fetch("c", 10) {
		if string(d.Payload) == "f-ok-b" {
			b.ack(d)
		} else if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: d.Receipt(), NotAttempt: true}}); err != nil {
			t.Fatal(err)
		}
	}
	// f-bad's steps all ended (a dead letter, and its dependent cancelled while the dead letter may
	// be requeued): it is listed as ended, failed, with f-ok.
	running, total, err := b.eng.FlowsPage(b.ctx, FlowsRunning, 0, 10)
	if err != nil || total != 1 || len(running) != 1 || running[0].ID != "f-run" || running[0].State != FlowRunning ||
		running[0].Steps != 2 || running[0].Created.IsZero() || !running[0].Ended.IsZero() || running[0].Keep != time.Hour {
		t.Fatalf("running flows: %+v, %d, %v", running, total, err)
	}
	ended, total, err := b.eng.FlowsPage(b.ctx, FlowsEnded, 0, 10)
	if err != nil || total != 2 || len(ended) != 2 {
		t.Fatalf("ended flows: %+v, %d, %v", ended, total, err)
	}
	byID := map[string]FlowSummary{}
	for _, f := range ended {
		byID[f.ID] = f
		if f.Ended.IsZero() {
			t.Errorf("ended flow %+v has no end", f)
		}
	}
	if f := byID["f-ok"]; f.State != FlowCompleted || f.Succeeded != 2 || f.Failed != 0 {
		t.Fatalf("f-ok: %+v", f)
	}
	if f := byID["f-bad"]; f.State != FlowFailed || f.Succeeded != 0 || f.Failed != 2 {
		t.Fatalf("f-bad: %+v", f)
	}
	if page, _, err := b.eng.FlowsPage(b.ctx, FlowsEnded, 1, 1); err != nil || len(page) != 1 || page[0].ID != ended[1].ID {
		t.Fatalf("second page of one: %+v, %v (first page %+v)", page, err, ended)
	}
	ended = []FlowSummary{byID["f-ok"]}
	score, err := b.client.ZScore(b.ctx, k.FlowsEnded(), "f-ok").Result()
	if err != nil || int64(score) != ended[0].Ended.Add(ended[0].Keep).UnixMilli() {
		t.Fatalf("flowsx score %v (%v), want the end of f-ok's retention", score, err)
	}
	if n, err := b.client.Exists(b.ctx, k.Flow("f-run")).Result(); err != nil || n != 1 {
		t.Fatalf("record of f-run at %s: %d, %v", k.Flow("f-run"), n, err)
	}
	for _, bad := range []struct {
		list          FlowList
		offset, limit int
	}{{"nope", 0, 1}, {FlowsRunning, -1, 1}, {FlowsRunning, 0, 0}, {FlowsEnded, MaxInspectPage, 1}} {
		if _, _, err := b.eng.FlowsPage(b.ctx, bad.list, bad.offset, bad.limit); !isInvalid(err) {
			t.Errorf("FlowsPage(%q, %d, %d): %v, want ErrInvalid", bad.list, bad.offset, bad.limit, err)
		}
	}

	// An ordered task published to hold its partition dies: the partition is held.
	b.publish(Message{ID: "h1", Partition: "!acct", HoldOnDead: true}, Message{ID: "h2", Partition: "!acct"})
	var back []Rejection
	for _, d := range b.fetch("c", 10) {
		if d.ID != "h1" {
			back = append(back, Rejection{Receipt: d.Receipt(), NotAttempt: true})
			continue
		}
		if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: d.Receipt(), Reason: "ledger says no"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.eng.Reject(b.ctx, back); err != nil {
		t.Fatal(err)
	}
	held, n, err := b.eng.HeldPartitions(b.ctx, 10)
	if err != nil || n != 1 || len(held) != 1 || held[0].Key != "!acct" || held[0].Since.IsZero() {
		t.Fatalf("held partitions: %+v, %d, %v", held, n, err)
	}
	if _, _, err := b.eng.HeldPartitions(b.ctx, 0); !isInvalid(err) {
		t.Fatalf("HeldPartitions(0): %v", err)
	}

	// Cancel f-run's pending step: the counters see the cancellation and the failed flow.
	if res, err := b.eng.Cancel(b.ctx, []string{StepID("f-run", "f-run-a")}, "stop"); err != nil || res[0].Err != nil {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	x, err := b.eng.ExtraStats(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := b.stats()
	want := ExtraStats{Waiting: st.Waiting, Cancelled: st.Cancelled, FlowsStarted: 3, FlowsCompleted: 1, FlowsFailed: 2,
		FlowsRunning: 0, FlowsEnded: 3, HeldPartitions: 1}
	if x != want || st.Cancelled == 0 || st.FlowsFailed != 2 {
		t.Fatalf("extra stats %+v, want %+v (stats %+v)", x, want, st)
	}

	// The newest events, oldest first, are the stream's last ones.
	evs, err := b.eng.LastEvents(b.ctx, 3)
	if err != nil || len(evs) != 3 {
		t.Fatalf("last events: %+v, %v", evs, err)
	}
	all, err := b.eng.Events(b.ctx, "0", MaxEventsRead, 0)
	if err != nil || len(all) < 3 || !slices.Equal(all[len(all)-3:], evs) {
		t.Fatalf("the stream ends with %+v, LastEvents gave %+v (%v)", all[max(0, len(all)-3):], evs, err)
	}
	if !slices.ContainsFunc(all, func(e Event) bool { return e.Kind == EventFlowFailed && e.ID == "f-run" }) {
		t.Fatalf("no flow_failed event of f-run in %+v", all)
	}
	if _, err := b.eng.LastEvents(b.ctx, 0); !isInvalid(err) {
		t.Fatalf("LastEvents(0): %v", err)
	}

	// The stream's size is announced for other processes' engines.
	if n, err := AnnouncedEvents(b.ctx, b.client, k); err != nil || n != 0 {
		t.Fatalf("before AnnounceEvents: %d, %v", n, err)
	}
	if err := b.eng.AnnounceEvents(b.ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := AnnouncedEvents(b.ctx, b.client, k); err != nil || n != 100 {
		t.Fatalf("announced events: %d, %v", n, err)
	}
}

func isInvalid(err error) bool { return errors.Is(err, ErrInvalid) }
