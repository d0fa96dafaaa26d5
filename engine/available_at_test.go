package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestRecordWithoutAvailableAt checks the record of a task available when it was published: it
// has no available-at field (t), and everything that reads one takes the publish time (c) instead:
// the task's info, its delivery, and the order of an ordered run when a task of it is rejected or
// its leases expire. Each ordered partition gets a task that was delayed and became available
// before a second one was published, so the run's order differs if a missing t were read as 0;
// and, published in one call, two tasks whose records keep their sequence numbers in the two
// forms a record may (short, and the 20 digits a requeue writes), compared as the 20 digits.
func TestRecordWithoutAvailableAt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	// pair publishes "<p>a", delayed by 1 ms, and, once the server's clock is past it, "<p>b".
	pair := func(p partition.Key) (a, bb string) {
		a, bb = string(p)+"a", string(p)+"b"
		b.publish(Message{ID: a, Partition: p, Delay: time.Millisecond})
		info, err := b.eng.Task(b.ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		b.waitServerPast(info.AvailableAt.Add(2 * time.Millisecond))
		b.publish(Message{ID: bb, Partition: p})
		return a, bb
	}

	t.Run("record", func(t *testing.T) {
		a, bb := pair("!info")
		rec := b.client.HGetAll(b.ctx, b.eng.Keys().Task(bb)).Val()
		if _, ok := rec["t"]; ok || rec["c"] == "" {
			t.Fatalf("record of %s %v: want c and no t", bb, rec)
		}
		if _, ok := b.client.HGetAll(b.ctx, b.eng.Keys().Task(a)).Val()["t"]; !ok {
			t.Fatalf("record of %s (delayed) has no t", a)
		}
		info, err := b.eng.Task(b.ctx, bb)
		if err != nil {
			t.Fatal(err)
		}
		if info.EnqueuedAt.IsZero() || !info.AvailableAt.Equal(info.EnqueuedAt) {
			t.Fatalf("%s: available at %v, enqueued at %v: want the same", bb, info.AvailableAt, info.EnqueuedAt)
		}
		// The record keeps the sequence number short; Task gives the 20 digits of the pending member.
		members := b.client.ZRange(b.ctx, b.eng.Keys().Pending("!info", 0), 0, -1).Val()
		if len(rec["s"]) >= seqDigits || !slices.Contains(members, info.Sequence+bb) {
			t.Fatalf("%s: record s %q, Task.Sequence %q, pending members %v", bb, rec["s"], info.Sequence, members)
		}
		ds := b.fetch("c", 2)
		if len(ds) != 2 || ds[0].ID != a || ds[1].ID != bb {
			t.Fatalf("fetched %v, want %s then %s", ds, a, bb)
		}
		if !ds[1].AvailableAt.Equal(info.EnqueuedAt) {
			t.Fatalf("delivery of %s: available at %v, want its publish time %v", bb, ds[1].AvailableAt, info.EnqueuedAt)
		}
		b.ack(ds...)
	})

	// mixed publishes "<p>a" and "<p>b" in one call (one ms: their order is their sequence numbers)
	// and gives b's record the 20 digits a requeue writes, where a's keeps the short form.
	mixed := func(p partition.Key) (a, bb string) {
		a, bb = string(p)+"a", string(p)+"b"
		b.publish(Message{ID: a, Partition: p}, Message{ID: bb, Partition: p})
		kt := b.eng.Keys().Task(bb)
		if err := b.client.HSet(b.ctx, kt, "s", padSequence(b.client.HGet(b.ctx, kt, "s").Val())).Err(); err != nil {
			t.Fatal(err)
		}
		return a, bb
	}

	// rejectFirst publishes a and then bb to p with publish, leases both, rejects a, and checks that the reject took bb back (it
	// comes after a in the partition's order) and that both are pending again, in order.
	rejectFirst := func(t *testing.T, publish func(partition.Key) (string, string), p partition.Key) {
		a, bb := publish(p)
		ds := b.fetch("r", 2)
		if len(ds) != 2 || ds[0].ID != a {
			t.Fatalf("fetched %v, want %s then %s", ds, a, bb)
		}
		if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt()}}); err != nil || res[0].Err != nil {
			t.Fatal(res, err)
		}
		if errs, _ := b.eng.Ack(b.ctx, []Receipt{ds[1].Receipt()}); !errors.Is(errs[0], ErrStaleToken) {
			t.Fatalf("ack of %s after the reject of %s: %v, want ErrStaleToken (taken back)", bb, a, errs)
		}
		if ids := b.drain("r"); !slices.Equal(ids, []string{a, bb}) {
			t.Fatalf("after the reject: %v, want %s then %s", ids, a, bb)
		}
	}

	// recoverRun publishes a and then bb to p with publish, leases both, lets the leases expire and recovers them: only the run's
	// first task can have been under way, so a's attempt counts and bb's not; both are pending
	// again, in order.
	recoverRun := func(t *testing.T, publish func(partition.Key) (string, string), p partition.Key) {
		a, bb := publish(p)
		run, err := b.eng.Fetch(b.ctx, "x", 2, shortLease)
		if err != nil || len(run) != 2 || run[0].ID != a {
			t.Fatalf("fetched %v %v, want %s then %s", run, err, a, bb)
		}
		b.expire(run)
		if rec, err := b.eng.Recover(b.ctx); err != nil || rec.Returned != 2 {
			t.Fatalf("recover %+v %v, want both back", rec, err)
		}
		for id, want := range map[string]int{a: 1, bb: 0} {
			if info, err := b.eng.Task(b.ctx, id); err != nil || info.Attempts != want {
				t.Fatalf("%s after the recovery: %d attempts (%v), want %d", id, info.Attempts, err, want)
			}
		}
		if ids := b.drain("x"); !slices.Equal(ids, []string{a, bb}) {
			t.Fatalf("after the recovery: %v, want %s then %s", ids, a, bb)
		}
	}

	t.Run("reject", func(t *testing.T) { rejectFirst(t, pair, "!reject") })
	t.Run("reject-mixed", func(t *testing.T) { rejectFirst(t, mixed, "!reject-mixed") })
	t.Run("recover", func(t *testing.T) { recoverRun(t, pair, "!recover") })
	t.Run("recover-mixed", func(t *testing.T) { recoverRun(t, mixed, "!recover-mixed") })
}
