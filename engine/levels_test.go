package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// fillLevels publishes one delayed task to p at each of the priorities from..to.
func (b *bundle) fillLevels(p partition.Key, from, to int) {
	b.t.Helper()
	var msgs []Message
	for prio := from; prio <= to; prio++ {
		msgs = append(msgs, Message{Partition: p, Priority: prio, Delay: time.Hour})
	}
	b.publish(msgs...)
}

// publishOp is a Publish of msgs as a merged call carries it.
func (b *bundle) publishOp(msgs ...Message) *op {
	b.t.Helper()
	o := &op{ctx: b.ctx}
	for _, m := range msgs {
		o.msgs, _ = messageArgs(o.msgs, m.ID, &m)
	}
	return o
}

// TestPublishBatchesAreRefusedWhole sends three callers' publishes as one merged call to a
// partition one priority short of the cap. The first takes the last priority; the second, which
// would pass the cap with its second message, is refused whole, its first message not written
// either; the third, with that second message's id again, is added as if the second caller had
// not sent anything.
func TestPublishBatchesAreRefusedWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Key("p")
	b.fillLevels(p, 1, MaxPriorityLevels-1)
	first := b.publishOp(Message{ID: "a", Partition: p, Priority: 100})
	second := b.publishOp(Message{ID: "b1", Partition: p}, Message{ID: "b2", Partition: p, Priority: 200})
	third := b.publishOp(Message{ID: "b2", Partition: p, Priority: 100}, Message{ID: "c", Partition: p})
	b.eng.sendPublishes([]*op{first, second, third})
	if first.err != nil || third.err != nil || len(dupsOf(first)) != 1 || len(dupsOf(third)) != 2 ||
		dupsOf(first)[0] || dupsOf(third)[0] || dupsOf(third)[1] {
		t.Fatalf("first %v %v, third %v %v: want both added", dupsOf(first), first.err, dupsOf(third), third.err)
	}
	if !errors.Is(second.err, ErrTooManyPriorities) {
		t.Fatalf("second: %v; want ErrTooManyPriorities", second.err)
	}
	if want := `message 1: its priority 200 would give partition "p"`; !strings.Contains(second.err.Error(), want) {
		t.Fatalf("second: %q does not say %q", second.err, want)
	}
	for id, want := range map[string]error{"a": nil, "b2": nil, "c": nil, "b1": ErrNotFound} {
		if _, err := b.eng.Task(b.ctx, id); !errors.Is(err, want) {
			t.Errorf("task %s: %v, want %v", id, err, want)
		}
	}
	if st := b.stats(); st.Published != MaxPriorityLevels-1+3 || st.Duplicates != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRequeueRespectsThePriorityCap: a dead letter whose priority its partition, full of other
// priorities, no longer has stays dead, with ErrTooManyPriorities, until one of them drains.
func TestRequeueRespectsThePriorityCap(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Key("p")
	b.publish(Message{ID: "x", Partition: p, Priority: 1000, MaxAttempts: 1})
	ds := b.fetch("c", 1)
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt()}}); err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for prio := 1; prio <= MaxPriorityLevels; prio++ {
		msgs = append(msgs, Message{Partition: p, Priority: prio})
	}
	b.publish(msgs...)
	errs, err := b.eng.Requeue(b.ctx, []string{"x"})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], ErrTooManyPriorities) {
		t.Fatalf("requeue at the cap: %v, %v; want ErrTooManyPriorities", errs, err)
	}
	if info, err := b.eng.Task(b.ctx, "x"); err != nil || info.State != StateDead {
		t.Fatalf("x: %+v, %v; want it dead still", info, err)
	}
	b.ack(b.fetch("c", 1)...) // the highest priority's only task: one level fewer
	if errs, err := b.eng.Requeue(b.ctx, []string{"x"}); err != nil || errs[0] != nil {
		t.Fatalf("requeue below the cap: %v, %v", errs, err)
	}
	if ds := b.fetch("c", 1); len(ds) != 1 || ds[0].ID != "x" {
		t.Fatalf("fetched %v; want x, the highest priority", ds)
	}
}

// TestRejectReturnsPastThePriorityCap: a reject returns a task to its priority also when its
// partition has since filled up with others (docs/data-model.md, section 12). The partition then
// has more priorities than the cap, refuses new ones until it is below it again, and serves its
// tasks in order.
func TestRejectReturnsPastThePriorityCap(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("o")
	b.publish(Message{ID: "top", Partition: p, Priority: 1000})
	ds := b.fetch("c", 1)
	var msgs []Message
	for prio := 1; prio <= MaxPriorityLevels; prio++ {
		msgs = append(msgs, Message{ID: "p" + strconv.Itoa(prio), Partition: p, Priority: prio})
	}
	b.publish(msgs...)
	if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt()}}); err != nil || res[0].Err != nil {
		t.Fatalf("reject: %v, %v", res, err)
	}
	_, err := b.eng.Publish(b.ctx, []Message{{Partition: p, Priority: 5000}})
	if !errors.Is(err, ErrTooManyPriorities) {
		t.Fatalf("publish past the cap: %v; want ErrTooManyPriorities", err)
	}
	want := []string{"top"}
	for prio := MaxPriorityLevels; prio >= 1; prio-- {
		want = append(want, "p"+strconv.Itoa(prio))
	}
	assertOrder(t, b.drain("c"), want)
}
