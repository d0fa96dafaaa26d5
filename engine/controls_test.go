package engine

import (
	"fmt"
	"testing"

	"github.com/srqueue/srq/partition"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("p")
	b.publish(Message{ID: "p1", Partition: p}, Message{ID: "p2", Partition: p}, Message{ID: "o1", Partition: "o"})
	if err := b.eng.Pause(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	assertOrder(t, b.drain("c"), []string{"o1"})
	b.publish(Message{ID: "p3", Partition: p}) // accepted while paused, not delivered
	if ds := b.fetch("c", 10); len(ds) != 0 {
		t.Fatalf("a paused partition delivered %+v", ds)
	}
	if err := b.eng.Resume(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	// Pausing while held: the release on ack must not put it back.
	run := b.fetch("c", 1)
	if err := b.eng.Pause(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	b.ack(run...)
	if ds := b.fetch("c", 10); len(ds) != 0 {
		t.Fatalf("a partition paused while held delivered after release: %+v", ds)
	}
	if err := b.eng.Resume(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	assertOrder(t, b.drain("c"), []string{"p2", "p3"})
	b.assertNoTaskKeys()
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const p = partition.Key("api")
	if err := b.eng.SetConcurrency(b.ctx, p, 2); err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for i := 0; i < 6; i++ {
		msgs = append(msgs, Message{ID: fmt.Sprint(i), Partition: p})
	}
	b.publish(msgs...)
	first := b.fetch("a", 10)
	if len(first) != 2 {
		t.Fatalf("limit 2 leased %d", len(first))
	}
	if ds := b.fetch("b", 10); len(ds) != 0 {
		t.Fatalf("over the limit: %+v", ds)
	}
	b.ack(first[0])
	second := b.fetch("b", 10)
	if len(second) != 1 {
		t.Fatalf("after one ack got %d, want 1", len(second))
	}
	if err := b.eng.SetConcurrency(b.ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	rest := b.fetch("b", 10)
	if len(rest) != 3 {
		t.Fatalf("after removing the limit got %d, want 3", len(rest))
	}
	b.ack(append(append(rest, second...), first[1])...)
	b.assertNoTaskKeys()
}

func TestEmptyFetchHoldsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("p")
	b.publish(Message{ID: "later", Partition: p, Delay: 3600e9})
	if ds := b.fetch("a", 5); len(ds) != 0 {
		t.Fatalf("%+v", ds)
	}
	k := b.eng.Keys()
	if n, _ := b.client.Exists(b.ctx, k.Held(p)).Result(); n != 0 {
		t.Fatal("an empty fetch left the partition held")
	}
	if n, _ := b.client.ZCard(b.ctx, k.Ready()).Result(); n != 0 {
		t.Fatal("a delayed partition is in ready")
	}
	// A drained partition takes new work, for any consumer.
	b.publish(Message{ID: "now", Partition: p})
	a := b.fetch("a", 5)
	if len(a) != 1 || a[0].ID != "now" {
		t.Fatalf("%+v", a)
	}
	b.ack(a...)
	b.publish(Message{ID: "again", Partition: p})
	if ds := b.fetch("b", 5); len(ds) != 1 || ds[0].ID != "again" {
		t.Fatalf("another consumer after a drain: %+v", ds)
	}
}

// TestPublishToPausedPartitionDropsExpiredBlock: a publish to a paused partition whose block
// (a rate limit's blocked-until) has passed places it through place, which drops the expired
// block. publish.lua makes place and meta_del only at their first use (lua/cold.go): this is the
// one test that runs meta_del from a publish.
func TestPublishToPausedPartitionDropsExpiredBlock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Key("blocked")
	if err := b.eng.Pause(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	meta := b.eng.Keys().Meta(p)
	if err := b.eng.Client().HSet(b.ctx, meta, "b", "1").Err(); err != nil { // blocked until 1970
		t.Fatal(err)
	}
	b.publish(Message{ID: "t", Partition: p})
	if n, err := b.eng.Client().HExists(b.ctx, meta, "b").Result(); err != nil || n {
		t.Fatalf("the expired block is still there (%v, %v)", n, err)
	}
	if paused, err := b.eng.Client().HExists(b.ctx, meta, "ps").Result(); err != nil || !paused {
		t.Fatalf("the pause is gone (%v, %v)", paused, err)
	}
	if ds := b.fetch("c", 10); len(ds) != 0 {
		t.Fatalf("a paused partition delivered %+v", ds)
	}
}
