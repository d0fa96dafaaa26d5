package engine

import (
	"slices"
	"testing"
	"time"
)

// A requeued dead letter that holds its ordered partition goes back to its own place in the
// partition's order: ahead of the tasks behind it, behind a task of a higher priority published
// while the partition was held (docs/guarantees.md, held partitions).
func TestHeldRequeueTakesItsPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a", Partition: "!acct", HoldOnDead: true, MaxAttempts: 1}, Message{ID: "b", Partition: "!acct"})
	ds := b.fetch("c", 1)
	if len(ds) != 1 || ds[0].ID != "a" {
		t.Fatalf("fetched %v, want a", ds)
	}
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "boom"}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if ds := b.fetch("c", 1); len(ds) != 0 {
		t.Fatalf("the held partition handed out %s", ds[0].ID)
	}
	b.publish(Message{ID: "hi", Partition: "!acct", Priority: 5}, Message{ID: "c", Partition: "!acct"})
	if errs, err := b.eng.Requeue(b.ctx, []string{"a"}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got, want := b.drain("c"), []string{"hi", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("order after the requeue: %v, want %v", got, want)
	}
}

// A debounce key expires DebounceKeep after its window and forgets its task: a task still pending
// then is not replaced by the next publish of the key, which adds another (docs/guarantees.md).
func TestDebounceKeyExpiryForgetsTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	msg := Message{Payload: []byte("x"), Debounce: &Debounce{Key: "k", Window: time.Hour}}
	first, err := b.eng.Publish(b.ctx, []Message{msg})
	if err != nil {
		t.Fatal(err)
	}
	key := b.eng.Keys().Debounce("k")
	if ttl := b.client.PTTL(b.ctx, key).Val(); ttl <= time.Hour || ttl > time.Hour+DebounceKeep {
		t.Fatalf("the key expires in %v, want in (1h, 1h+%v]", ttl, DebounceKeep)
	}
	b.client.Del(b.ctx, key) // as its expiry would
	second, err := b.eng.Publish(b.ctx, []Message{msg})
	if err != nil {
		t.Fatal(err)
	}
	if second[0].Replaced || second[0].ID == first[0].ID || b.stats().Pending != 2 {
		t.Fatalf("after the key's expiry: %+v (first %s), pending %d; want a second task", second[0], first[0].ID, b.stats().Pending)
	}
}
