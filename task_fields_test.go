package srq_test

import (
	"context"
	"sync"
	"testing"

	"github.com/srqueue/srq"
)

// TestWhatAHandlerSees: the docs' promises about a task's fields. Task.Partition is the key as
// stored ("!bob" for an ordered partition bob, "bob" for the unordered one, "" for the base
// partition); a flow step's handler learns its step from Step and its flow from FlowID (its ID is
// "<flow id>/<step>"); another task has neither.
func TestWhatAHandlerSees(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	type seen struct{ partition, step, flow, id string }
	var mu sync.Mutex
	got := map[string]seen{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		mu.Lock()
		got[t.Value] = seen{string(t.Partition), t.Step(), t.FlowID(), t.ID}
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for v, o := range map[string]srq.PublishOpts{
		"ordered":   {ID: "o", Partition: "bob", Ordered: true},
		"unordered": {ID: "u", Partition: "bob"},
		"base":      {ID: "b"},
	} {
		if _, err := q.Publish(ctx, v, &o); err != nil {
			t.Fatal(err)
		}
	}
	first := q.Step("charge", "charge", nil)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "order-1", Steps: []*srq.Step{first, q.Step("ship", "ship", nil).After(first)}}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 5 {
			break
		}
	}
	want := map[string]seen{
		"ordered":   {"!bob", "", "", "o"},
		"unordered": {"bob", "", "", "u"},
		"base":      {"", "", "", "b"},
		"charge":    {"", "charge", "order-1", "order-1/charge"},
		"ship":      {"", "ship", "order-1", "order-1/ship"},
	}
	mu.Lock()
	defer mu.Unlock()
	for v, w := range want {
		if got[v] != w {
			t.Errorf("%s: handler saw %+v, want %+v", v, got[v], w)
		}
	}
}
