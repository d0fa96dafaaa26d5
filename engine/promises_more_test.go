package engine

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// promiseKillAll fetches n tasks of b's queue with eng and dead-letters them in one call.
func (b *bundle) promiseKillAll(eng *Engine, n int) {
	b.t.Helper()
	ds, err := eng.Fetch(b.ctx, "c", n, time.Minute)
	if err != nil || len(ds) != n {
		b.t.Fatalf("fetch %d: got %d, %v", n, len(ds), err)
	}
	fs := make([]Failure, len(ds))
	for i := range ds {
		fs[i] = Failure{Receipt: ds[i].Receipt(), Reason: "broke"}
	}
	errs, err := eng.Kill(b.ctx, fs)
	if err != nil {
		b.t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			b.t.Fatalf("kill %s: %v", fs[i].ID, e)
		}
	}
}

// TestPromiseDeadLetterTrimAtMost100: docs/guarantees.md "the oldest dead letters over either cap
// are deleted, at most 100 per dead-lettering", and docs/data-model.md "≤ 100 letters trimmed per
// dead-lettering (count cap first, then age cap, oldest first)". 200 letters written with no cap,
// then one death under a count cap of 1 trims 100 of them, the oldest; the next death under a count
// cap and an age cap trims 100 again, the two caps sharing the 100.
func TestPromiseDeadLetterTrimAtMost100(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DeadLetterMaxCount: -1, DeadLetterMaxAge: -1})
	queue := b.eng.Config().Queue
	const first = 200
	msgs := make([]Message, first)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprintf("old%03d", i)}
	}
	b.publish(msgs...)
	b.promiseKillAll(b.eng, first)
	if s := b.stats(); s.Dead != first || s.Trimmed != 0 {
		t.Fatalf("with no caps: dead %d, trimmed %d; want %d, 0", s.Dead, s.Trimmed, first)
	}
	oldest, err := b.client.ZRange(b.ctx, b.eng.Keys().Dead(), 0, 0).Result()
	if err != nil || len(oldest) != 1 {
		t.Fatalf("oldest letter: %v, %v", oldest, err)
	}

	// A count cap of 1: 200 letters are over it, and one death trims 100 of them, oldest first.
	capped, err := New(b.client, Config{Queue: queue, DeadLetterMaxCount: 1, DeadLetterMaxAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(Message{ID: "new1"})
	b.promiseKillAll(capped, 1)
	s := b.stats()
	if s.Trimmed != 100 || s.Dead != first+1-100 {
		t.Fatalf("one death over the count cap: trimmed %d, dead %d; want 100, %d", s.Trimmed, s.Dead, first+1-100)
	}
	left, err := b.client.ZRange(b.ctx, b.eng.Keys().Dead(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range left[:len(left)-1] {
		if want := fmt.Sprintf("old%03d", 100+i); id != want {
			t.Fatalf("letter %d left is %s, want %s: the oldest 100 go first", i, id, want)
		}
	}

	// Both caps, sharing one budget: 102 letters, the count cap of 50 trims 52, then the age cap
	// (every letter is older than a millisecond but the new one) the 48 left of the budget: 2 stay.
	b.waitServerPast(b.serverNow().Add(5 * time.Millisecond))
	both, err := New(b.client, Config{Queue: queue, DeadLetterMaxCount: 50, DeadLetterMaxAge: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(Message{ID: "new2"})
	b.promiseKillAll(both, 1)
	s2 := b.stats()
	if got := s2.Trimmed - s.Trimmed; got != 100 {
		t.Fatalf("one death over both caps trimmed %d, want 100", got)
	}
	if s2.Dead != 2 {
		t.Fatalf("dead %d after trimming, want 2", s2.Dead)
	}
}

// TestPromisePromotionChunk: docs/data-model.md "up to max(64, 4·n) members of sched with score ≤
// now are removed from sched and appended to ready (in due order)", docs/guarantees.md "at most
// max(64, 4·n) per fetch, in due order". 156 partitions fall due; a fetch of 1 promotes 64 (the
// earliest due), a fetch of 21 promotes 84.
func TestPromisePromotionChunk(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const parts, early = 156, 64
	// Delays count from the server's receipt of the publish, so every partition is in sched
	// however long the publish takes; the first 64 fall due 5ms before the others.
	msgs := make([]Message, parts)
	for i := range msgs {
		delay := 20 * time.Millisecond
		if i >= early {
			delay += 5 * time.Millisecond
		}
		msgs[i] = Message{Partition: partition.Key("p" + strconv.Itoa(i)), Delay: delay, Payload: []byte("x")}
	}
	b.publish(msgs[:1]...) // the first call of a script loads it: not timed below
	b.publish(msgs[1:]...)
	sched := b.eng.Keys().Sched()
	card := func() int64 {
		t.Helper()
		n, err := b.client.ZCard(b.ctx, sched).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := card(); n != parts {
		t.Fatalf("sched holds %d partitions before they are due, want %d", n, parts)
	}
	b.waitServerPast(b.serverNow().Add(26 * time.Millisecond))

	if ds := b.fetch("c", 1); len(ds) != 1 {
		t.Fatalf("fetch of 1 leased %d", len(ds))
	}
	if n := card(); n != parts-64 {
		t.Fatalf("after a fetch of 1, sched holds %d, want %d: max(64, 4·1) = 64 promoted", n, parts-64)
	}
	left, err := b.client.ZRange(b.ctx, sched, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if i, _ := strconv.Atoi(p[1:]); i < early {
			t.Fatalf("partition %s, among the earliest due, is still in sched: promotion is not in due order", p)
		}
	}

	if ds := b.fetch("c", 21); len(ds) != 21 {
		t.Fatalf("fetch of 21 leased %d", len(ds))
	}
	if n := card(); n != parts-64-84 {
		t.Fatalf("after a fetch of 21, sched holds %d, want %d: max(64, 4·21) = 84 promoted", n, parts-64-84)
	}
}

// TestPromiseOutcomeGoneAtItsRetention: docs/lifecycle.md "A kept outcome ... is gone for its
// readers when its retention ends": an outcome kept 100 ms is read before that, and is not found
// after it, though no later call has written an outcome (which is what deletes its keys).
func TestPromiseOutcomeGoneAtItsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.publish(Message{KeepOutcome: 100 * time.Millisecond})[0]
	b.ack(b.fetch("c", 1)...)
	o, err := b.eng.Outcome(b.ctx, id)
	if err != nil || o.State != StateSucceeded {
		t.Fatalf("outcome within its retention: %+v, %v", o, err)
	}
	b.waitServerPast(o.Ended.Add(100 * time.Millisecond))
	if o, err := b.eng.Outcome(b.ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("outcome past its retention: %+v, %v; want ErrNotFound", o, err)
	}
	if n, err := b.client.Exists(b.ctx, b.eng.Keys().Outcome(id)).Result(); err != nil || n != 1 {
		t.Fatalf("the outcome's key: %d, %v; want it still there, as nothing wrote an outcome since", n, err)
	}
}
