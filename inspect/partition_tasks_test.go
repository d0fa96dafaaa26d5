package inspect

import (
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TestPartitionTasks lists a partition's due tasks in fetch order and its delayed ones soonest
// first, paged, on the shard that holds it, with the counts of both.
func TestPartitionTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	const p = partition.Key("p")
	m := func(id string, prio int, delay time.Duration) engine.Message {
		return engine.Message{ID: id, Partition: p, Priority: prio, Delay: delay, MaxAttempts: 3}
	}
	b.publish(m("a0", 0, 0), m("a1", 0, 0), m("h0", 5, 0), m("l0", -3, 0), m("d1", 0, time.Hour), m("d2", 9, 2*time.Hour))
	old := m("old", 0, 0)
	old.At = time.Now().Add(-time.Hour)
	b.publish(old)
	b.publish(msg("other", "q")) // another partition, maybe on the other shard
	// h0 is fetched first; sent back with a reason, it keeps its attempt and error.
	ds, err := b.eng(p).Fetch(b.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != "h0" {
		t.Fatalf("fetch: %v %+v", err, ds)
	}
	if _, err := b.eng(p).Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), Reason: "busy"}}); err != nil {
		t.Fatal(err)
	}
	list := func(q PartitionTaskQuery) PartitionTasks {
		t.Helper()
		pt, err := b.in.PartitionTasks(b.ctx, b.queue, p, q)
		if err != nil {
			t.Fatal(err)
		}
		if pt.Due != 5 || pt.Delayed != 2 || pt.Shard != engine.ShardOf(p, 2) || pt.ServerTime.IsZero() {
			t.Fatalf("%+v: due %d delayed %d shard %d time %v", q, pt.Due, pt.Delayed, pt.Shard, pt.ServerTime)
		}
		return pt
	}
	for _, tt := range []struct {
		q    PartitionTaskQuery
		want string
	}{
		{PartitionTaskQuery{}, "h0,old,a0,a1,l0"},
		{PartitionTaskQuery{Page: Page{Offset: 1, Limit: 2}}, "old,a0"},
		{PartitionTaskQuery{Page: Page{Offset: 4, Limit: 2}}, "l0"},
		{PartitionTaskQuery{Page: Page{Offset: 5}}, ""},
		{PartitionTaskQuery{Delayed: true}, "d1,d2"},
		{PartitionTaskQuery{Delayed: true, Page: Page{Offset: 1, Limit: 1}}, "d2"},
	} {
		pt := list(tt.q)
		if got := ids(pt.Tasks, func(x PendingTask) string { return x.ID }); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.q, got, tt.want)
		}
	}
	h0 := list(PartitionTaskQuery{Page: Page{Limit: 1}}).Tasks[0]
	if h0.Priority != 5 || h0.Attempts != 1 || h0.MaxAttempts != 3 || h0.LastError != "busy" || h0.EnqueuedAt.IsZero() ||
		h0.AvailableAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("h0 %+v", h0)
	}
	d2 := list(PartitionTaskQuery{Delayed: true, Page: Page{Offset: 1}}).Tasks[0]
	if d2.Priority != 9 || d2.AvailableAt.Sub(d2.EnqueuedAt).Round(time.Minute) != 2*time.Hour {
		t.Errorf("d2 %+v", d2)
	}
	empty, err := b.in.PartitionTasks(b.ctx, b.queue, "none", PartitionTaskQuery{})
	if err != nil || empty.Due != 0 || empty.Delayed != 0 || len(empty.Tasks) != 0 || empty.Tasks == nil {
		t.Fatalf("an empty partition: %+v %v", empty, err)
	}
	for _, q := range []PartitionTaskQuery{{Page: Page{Offset: -1}}, {Page: Page{Limit: MaxLimit + 1}},
		{Page: Page{Offset: MaxOffset}}} {
		_, err := b.in.PartitionTasks(b.ctx, b.queue, p, q)
		mustErr(t, err, engine.ErrInvalid)
	}
	_, err = b.in.PartitionTasks(b.ctx, "nosuch", p, PartitionTaskQuery{})
	mustErr(t, err, engine.ErrNotFound)
}
