package engine

import (
	"testing"
	"time"
)

// TestSignalMakesATimedWaitDueNow: a task that waits for a signal for at most an hour is pending
// until then; the signal makes it due at once, so the next fetch gets it, with the signal.
func TestSignalMakesATimedWaitDueNow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "w", Partition: "u"})
	ds := b.fetch("c", 1)
	if len(ds) != 1 {
		t.Fatalf("fetched %v, want w", ds)
	}
	res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Delay: time.Hour,
		Wait: &Wait{Kind: WaitSignal, Signal: "go"}}})
	if err != nil || res[0].Err != nil {
		t.Fatal(res, err)
	}
	if ds := b.fetch("c", 1); len(ds) != 0 {
		t.Fatalf("fetched %v while it waits for its signal", ds)
	}
	if ok, err := b.eng.Signal(b.ctx, "w", "go", []byte("v")); err != nil || !ok {
		t.Fatalf("signal: %v %v, want it taken", ok, err)
	}
	ds = b.fetch("c", 1)
	if len(ds) != 1 || ds[0].ID != "w" {
		t.Fatalf("fetched %v after the signal, want w at once", ds)
	}
}
