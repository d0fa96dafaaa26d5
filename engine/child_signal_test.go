package engine

import (
	"testing"
	"time"
)

// TestChildEndSignalsItsParent: a spawned child's record names its parent (K '2', F), and its end
// tells the parent directly, with no list of its own; a child spawned by an earlier version (K '1',
// its parent's ref in its fc: list) tells it through the list, which its end deletes. Either way the
// parent, parked on its children, comes back once both ended.
func TestChildEndSignalsItsParent(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "parent"})
	ds := b.fetch("w", 1)
	if len(ds) != 1 {
		t.Fatalf("fetched %d", len(ds))
	}
	if _, err := b.eng.Spawn(b.ctx, b.eng, "parent", []SpawnChild{{Name: "new"}, {Name: "old"}}); err != nil {
		t.Fatal(err)
	}
	base := b.eng.keys.base
	for _, id := range []string{"parent/new", "parent/old"} {
		f, err := b.client.HMGet(b.ctx, base+"t:"+id, "K", "F").Result()
		if err != nil || f[0] != "2" || f[1] != "parent" {
			t.Fatalf("%s: K, F = %v, %v; want 2, parent", id, f, err)
		}
		if n, err := b.client.Exists(b.ctx, base+"fc:"+id).Result(); err != nil || n != 0 {
			t.Fatalf("%s has a children list: %d %v", id, n, err)
		}
	}
	// The layout of an earlier version for "old".
	if err := b.client.HSet(b.ctx, base+"t:parent/old", "K", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.client.RPush(b.ctx, base+"fc:parent/old", base+"parent").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Wait: &Wait{Kind: WaitChildren}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("wait: %v %v", res, err)
	}
	kids := b.fetch("w", 2)
	if len(kids) != 2 {
		t.Fatalf("fetched %d children", len(kids))
	}
	for i, k := range kids {
		b.ack(k)
		rest, err := b.client.HGet(b.ctx, base+"t:parent", "R").Result()
		if err != nil || rest != map[int]string{0: "1", 1: "0"}[i] {
			t.Fatalf("after %s: the parent counts %q children not ended (%v)", k.ID, rest, err)
		}
	}
	if n, err := b.client.Exists(b.ctx, base+"fc:parent/old").Result(); err != nil || n != 0 {
		t.Fatalf("the old child's list is left: %d %v", n, err)
	}
	cs, err := b.eng.Children(b.ctx, "parent")
	if err != nil || len(cs) != 2 || cs[0].State != StateSucceeded || cs[1].State != StateSucceeded {
		t.Fatalf("children: %+v %v", cs, err)
	}
	back, err := b.eng.Fetch(b.ctx, "w", 1, time.Minute)
	if err != nil || len(back) != 1 || back[0].ID != "parent" {
		t.Fatalf("the parent did not come back: %v %v", back, err)
	}
}
