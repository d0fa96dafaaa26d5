package engine

import "testing"

// A stats hash written by a version that counted publishes in pending and published reads the
// same, and publishes from now on count in pub, which Stats adds to both.
func TestStatsReadOldCounters(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if err := b.client.HSet(b.ctx, b.eng.keys.Stats(), "pending", 5, "published", 7).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := b.eng.Stats(b.ctx)
	if err != nil || st.Pending != 5 || st.Published != 7 {
		t.Fatalf("the old counters: pending %d, published %d, %v; want 5, 7", st.Pending, st.Published, err)
	}
	b.publish(Message{ID: "a"})
	st, err = b.eng.Stats(b.ctx)
	if err != nil || st.Pending != 6 || st.Published != 8 {
		t.Fatalf("after a publish: pending %d, published %d, %v; want 6, 8", st.Pending, st.Published, err)
	}
	if ov, err := b.eng.Overview(b.ctx, 0); err != nil || ov.Pending != 6 || ov.Published != 8 {
		t.Fatalf("Overview: pending %d, published %d, %v; want 6, 8", ov.Pending, ov.Published, err)
	}
}
