package engine

import (
	"testing"
	"time"
)

// TestWaitAndWake: Wait reports a timeout as not woken, takes a token Wake left (or a publish made)
// and reports it as woken; a fetch that finds nothing drops the tokens left.
func TestWaitAndWake(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if woken, err := b.eng.Wait(b.ctx, 20*time.Millisecond); err != nil || woken {
		t.Fatalf("Wait on an empty queue: woken %v, %v", woken, err)
	}
	if err := b.eng.Wake(b.ctx); err != nil {
		t.Fatal(err)
	}
	if woken, err := b.eng.Wait(b.ctx, time.Minute); err != nil || !woken {
		t.Fatalf("Wait after Wake: woken %v, %v", woken, err)
	}
	b.publish(Message{ID: "a"})
	if woken, err := b.eng.Wait(b.ctx, time.Minute); err != nil || !woken {
		t.Fatalf("Wait after a publish: woken %v, %v", woken, err)
	}
	if err := b.eng.Wake(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.ack(b.fetch("c", 1)...)
	if len(b.fetch("c", 1)) != 0 {
		t.Fatal("a task left")
	}
	if n, err := b.client.LLen(b.ctx, b.eng.Keys().Wake()).Result(); err != nil || n != 0 {
		t.Fatalf("%d wake-up tokens left after an empty fetch, %v", n, err)
	}
}
