package engine

import (
	"errors"
	"testing"
)

// Delivery.Parents (engine.Parents) of a first step of a flow written in one call, which has no
// parents to record, is an empty list, as for a first step of a flow written in parts (whose only
// entry, the gate, is left out); a task that is no flow step fails with ErrNotFound.
func TestParentsOfFirstStep(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a")}}); err != nil {
		t.Fatal(err)
	}
	ds := b.fetch("c", 1)
	if len(ds) != 1 {
		t.Fatal("no first step")
	}
	if ps, err := b.eng.Parents(b.ctx, ds[0].ID); err != nil || len(ps) != 0 {
		t.Fatalf("parents of the first step: %v, %v; want none and no error", ps, err)
	}
	b.publish(Message{ID: "plain"})
	if _, err := b.eng.Parents(b.ctx, "plain"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("parents of a task that is no flow step: %v, want ErrNotFound", err)
	}
}
