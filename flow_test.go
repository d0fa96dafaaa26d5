package srq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

type mail struct{ To, Subject string }

// The order pipeline: charge, then an e-mail, an invoice and a warehouse request in parallel,
// then complete, which reads every parent's typed result. Two queues of two payload types.
func TestFlowOrderPipeline(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	orders, c := newQueue[order](t, srq.QueueConfig{})
	mails, err := srq.NewQueue[mail](c, srq.QueueConfig{Name: orders.Name() + "-mail"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	note := func(s string) {
		mu.Lock()
		ran = append(ran, s)
		mu.Unlock()
	}
	ow, err := srq.NewWorker(orders, srq.ResultHandlerFunc[order, string](func(ctx context.Context, t *srq.Task[order]) (string, error) {
		note(t.Step())
		if t.Step() != "complete" {
			return t.Step() + " of " + t.Value.User, nil
		}
		var parts []string
		for _, p := range []string{"charge", "invoice", "ship", "email"} {
			r, err := srq.ParentResult[string](ctx, t.Delivery, p)
			if errors.Is(err, srq.ErrNotFound) && p == "charge" {
				continue // not a parent of complete: it is a grandparent
			}
			if err != nil {
				return "", fmt.Errorf("parent %s: %w", p, err)
			}
			parts = append(parts, r)
		}
		return fmt.Sprint(parts), nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := srq.NewWorker(mails, srq.ResultHandlerFunc[mail, string](func(ctx context.Context, t *srq.Task[mail]) (string, error) {
		note(t.Step())
		if r, err := srq.ParentResult[string](ctx, t.Delivery, "charge"); err != nil || r != "charge of ann" {
			return "", fmt.Errorf("charge's result: %q, %v", r, err)
		}
		return "mailed " + t.Value.To, nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	o := order{User: "ann"}
	charge := orders.Step("charge", o, nil)
	f := &srq.Flow{ID: "order-ann", Steps: []*srq.Step{
		charge,
		mails.Step("email", mail{To: "ann@example.com"}, nil).After(charge),
		orders.Step("invoice", o, nil).After(charge),
		orders.Step("ship", o, nil).After(charge),
	}}
	f.Steps = append(f.Steps, orders.Step("complete", o, nil).After(f.Steps[1:]...))
	res, err := srq.PublishFlow(ctx, f)
	if err != nil || res.ID != "order-ann" || res.Duplicate {
		t.Fatalf("PublishFlow: %+v, %v", res, err)
	}
	runWorker(t, ow)
	runWorker(t, mw)
	waitFor(t, "the flow to complete", func() bool {
		info, err := orders.Flow(ctx, "order-ann")
		return err == nil && info.State == srq.FlowCompleted
	})
	mu.Lock()
	defer mu.Unlock()
	if ran[0] != "charge" || ran[len(ran)-1] != "complete" || len(ran) != 5 {
		t.Fatalf("ran %v", ran)
	}
	got, err := srq.ResultOf[string](ctx, orders, "order-ann/complete")
	if err != nil || got != "[invoice of ann ship of ann mailed ann@example.com]" {
		t.Fatalf("complete's result: %q, %v", got, err)
	}
	if res, err := srq.PublishFlow(ctx, f); err != nil || !res.Duplicate {
		t.Fatalf("the flow again: %+v, %v", res, err)
	}
}

// A flow whose last step is invalid writes nothing.
func TestFlowAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[order](t, srq.QueueConfig{})
	a := q.Step("a", order{}, nil)
	b := q.Step("b", order{}, &srq.PublishOpts{Priority: 1 << 40}).After(a)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: srq.Chain(a, b)}); !errors.Is(err, srq.ErrInvalid) {
		t.Fatalf("PublishFlow: %v, want ErrInvalid", err)
	}
	outside := q.Step("outside", order{}, nil)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "g", Steps: []*srq.Step{q.Step("x", order{}, nil).After(outside)}}); !errors.Is(err, srq.ErrInvalid) {
		t.Fatalf("a dependency outside the flow: %v", err)
	}
	// A value the codec cannot encode is an invalid step (flows.md), for PublishFlow and ScheduleFlow.
	anyq, err := srq.NewQueue[any](c, srq.QueueConfig{Name: q.Name()})
	if err != nil {
		t.Fatal(err)
	}
	unencodable := &srq.Flow{Steps: []*srq.Step{anyq.Step("u", func() {}, nil)}}
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "h", Steps: unencodable.Steps}); !errors.Is(err, srq.ErrInvalid) || !strings.Contains(err.Error(), "msgpack") {
		t.Fatalf("a step the codec cannot encode: %v, want ErrInvalid with the codec's error", err)
	}
	if _, err := anyq.ScheduleFlow(ctx, "s", unencodable, &srq.ScheduleOpts{Every: time.Hour}); !errors.Is(err, srq.ErrInvalid) {
		t.Fatalf("ScheduleFlow of a step the codec cannot encode: %v, want ErrInvalid", err)
	}
	if keys, _ := c.Keys(ctx, "srq:{"+q.Name()+"}*").Result(); len(keys) != 0 {
		t.Fatalf("an invalid flow wrote %v", keys)
	}
}

// A chain over the shards of a sharded queue: each step's partition puts it in another shard,
// and each release goes through the relay.
func TestFlowAcrossShards(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{Shards: 4})
	var steps []*srq.Step
	for i := range 8 {
		steps = append(steps, q.Step(fmt.Sprint("s", i), order{Seq: i}, &srq.PublishOpts{Partition: fmt.Sprint("p", i)}))
	}
	var mu sync.Mutex
	var seqs []int
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		mu.Lock()
		seqs = append(seqs, t.Value.Seq)
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "chain", Steps: srq.Chain(steps...)}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "the chain to complete", func() bool {
		info, err := q.Flow(ctx, "chain")
		return err == nil && info.State == srq.FlowCompleted
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seqs, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("ran %v", seqs)
	}
	shards := map[string]bool{}
	info, _ := q.Flow(ctx, "chain")
	for _, s := range info.Steps {
		shards[s.Queue] = true
	}
	if len(shards) < 2 {
		t.Fatalf("the steps all landed in one shard: %v", shards)
	}
}

// A step in an ordered partition keeps the partition's order with the other tasks of it: it
// enters the partition when it is released, behind the tasks already there, and runs one at a
// time with them.
func TestFlowStepInOrderedPartition(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	var seen []string
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		seen = append(seen, t.Value.User) // one handler: no lock needed
		return nil
	}), srq.WorkerConfig{Logger: quiet, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(name string) {
		if _, err := q.Publish(ctx, order{User: name}, &srq.PublishOpts{Partition: "u", Ordered: true}); err != nil {
			t.Fatal(err)
		}
	}
	gate := q.Step("gate", order{User: "gate"}, &srq.PublishOpts{Partition: "g"})
	step := q.Step("step", order{User: "step"}, &srq.PublishOpts{Partition: "u", Ordered: true}).After(gate)
	publish("first")
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: []*srq.Step{gate, step}}); err != nil {
		t.Fatal(err)
	}
	publish("second") // before the step is released: it goes ahead of the step
	for len(seen) < 3 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publish("third") // after the release: behind the step
	for len(seen) < 5 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var inU []string
	for _, s := range seen {
		if s != "gate" {
			inU = append(inU, s)
		}
	}
	if want := []string{"first", "second", "step", "third"}; !slices.Equal(inU, want) {
		t.Fatalf("partition u ran %v, want %v (all: %v)", inU, want, seen)
	}
}

// TestFlowSnapshotIsConsistent: Queue.Flow's state and counts agree with the step states it lists
// when the steps live in the flow's queue, also read while a step fails and its dependent is
// cancelled (the record was once read before the steps, and a failed flow could show running with
// a dead step).
func TestFlowSnapshotIsConsistent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if t.Step() == "a" {
			return srq.Permanent(errors.New("boom"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	reads := 0
	for n := range 20 {
		id := fmt.Sprint("snap-", n)
		a := q.Step("a", order{}, nil)
		b := q.Step("b", order{}, nil).After(a)
		if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: id, Steps: []*srq.Step{a, b}}); err != nil {
			t.Fatal(err)
		}
		for {
			fi, err := q.Flow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			reads++
			ended := 0
			for _, s := range fi.Steps {
				if s.State == engine.StateDead || s.State == engine.StateCancelled || s.State == engine.StateSucceeded {
					ended++
				}
			}
			if (ended > 0) != (fi.State == srq.FlowFailed) || ended > fi.Succeeded+fi.Failed {
				t.Fatalf("flow %s read as %s (succeeded %d, failed %d) with steps %+v", id, fi.State, fi.Succeeded, fi.Failed, fi.Steps)
			}
			if ended == 2 {
				break
			}
		}
	}
	t.Logf("%d readings", reads)
}
