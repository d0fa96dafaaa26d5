package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestLeaseLivesOutsideTheRecord pins where a delivery's state is kept: a fetch writes nothing to
// the task's record, only the lease (token, tracked mark, consumer) into the leases hash; the
// record's attempts field counts the deliveries that ended, and Task reports the current one as the
// next. Reject, ack and recover end the lease with the hash field.
func TestLeaseLivesOutsideTheRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p       partition.Key
		tracked string
	}{{"u", "u"}, {partition.Ordered("o"), "t"}} {
		t.Run(string(tc.p), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			k := b.eng.Keys()
			b.publish(Message{ID: "t1", Partition: tc.p, MaxAttempts: 5})
			record := func() map[string]string {
				t.Helper()
				m, err := b.client.HGetAll(b.ctx, k.Task("t1")).Result()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			lease := func() (string, bool) {
				t.Helper()
				v, err := b.client.HGet(b.ctx, k.Leases(), "t1").Result()
				return v, err == nil
			}
			before := record()

			d := b.fetch("c1", 1)[0]
			if got := record(); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatalf("fetch changed the record: %v, before %v", got, before)
			}
			want := d.Token.String() + tc.tracked + "c1"
			if v, ok := lease(); !ok || v != want {
				t.Fatalf("lease %q (%v), want %q", v, ok, want)
			}
			ti, err := b.eng.Task(b.ctx, "t1")
			if err != nil {
				t.Fatal(err)
			}
			if ti.State != StateLeased || ti.Token != d.Token || ti.Consumer != "c1" || ti.Attempts != 1 || d.Attempt != 1 {
				t.Fatalf("task %+v, delivery attempt %d", ti, d.Attempt)
			}

			// A counted reject ends the lease and records the attempt.
			if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: d.Receipt()}}); err != nil || res[0].Err != nil {
				t.Fatalf("reject: %v %v", res, err)
			}
			if _, ok := lease(); ok {
				t.Fatal("the lease outlived the reject")
			}
			if a := record()["a"]; a != "1" {
				t.Fatalf("attempts after a reject: %q, want 1", a)
			}

			// The next delivery is attempt 2; an expired lease that counts makes it 2 ended.
			d = b.fetch("c2", 1)[0]
			if d.Attempt != 2 || record()["a"] != "1" {
				t.Fatalf("second delivery: attempt %d, record %v", d.Attempt, record())
			}
			if errs, _, err := b.eng.Extend(b.ctx, []Receipt{d.Receipt()}, shortLease); err != nil || errs[0] != nil {
				t.Fatalf("extend: %v %v", errs, err)
			}
			b.expire([]Delivery{d})
			if rec, err := b.eng.Recover(b.ctx); err != nil || rec.Returned != 1 {
				t.Fatalf("recover: %+v %v", rec, err)
			}
			if _, ok := lease(); ok {
				t.Fatal("the lease outlived its recovery")
			}
			if r := record(); r["a"] != "2" || r["n"] != "1" {
				t.Fatalf("record after recovery: %v", r)
			}

			// An ack deletes both.
			d = b.fetch("c3", 1)[0]
			if d.Attempt != 3 {
				t.Fatalf("third delivery: attempt %d", d.Attempt)
			}
			b.ack(d)
			if _, ok := lease(); ok || len(record()) != 0 {
				t.Fatalf("after the ack: lease %v, record %v", ok, record())
			}
		})
	}
}

// TestBatchesBeyondOneChunk: fetch, extend and ack of 2,500 tasks in one call each read and write
// the leases in chunks of 1000 values; the codes must still line up with the receipts, including
// a repeated and a stale receipt past the first chunk.
func TestBatchesBeyondOneChunk(t *testing.T) {
	t.Parallel()
	const n = 2500
	b := setup(t, Config{})
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprintf("t%04d", i), Partition: partition.Key(fmt.Sprintf("p%d", i%7))}
	}
	b.publish(msgs...)
	ds, err := b.eng.Fetch(b.ctx, "c1", n, time.Minute)
	if err != nil || len(ds) != n {
		t.Fatalf("fetch: %d tasks, %v", len(ds), err)
	}
	rs := make([]Receipt, 0, n+2)
	for _, d := range ds {
		rs = append(rs, d.Receipt())
	}
	stale := rs[1700]
	stale.Token++
	rs = append(rs, rs[1500], stale)

	errs, _, err := b.eng.Extend(b.ctx, rs, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		want := error(nil)
		if i == n+1 {
			want = ErrStaleToken
		}
		if !errors.Is(e, want) {
			t.Fatalf("extend %d (%s): %v, want %v", i, rs[i].ID, e, want)
		}
	}

	errs, err = b.eng.Ack(b.ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		var want error
		switch i {
		case n:
			want = ErrNotFound // the repeat: acked by its first item
		case n + 1:
			want = ErrNotFound // acked by then, so not found rather than stale
		}
		if !errors.Is(e, want) {
			t.Fatalf("ack %d (%s): %v, want %v", i, rs[i].ID, e, want)
		}
	}
	if st := b.stats(); st.InFlight != 0 {
		t.Fatalf("%d still in flight", st.InFlight)
	}
	b.assertNoTaskKeys()
}

// TestTrackedLeaseWithAwkwardConsumer: a consumer id with ':' and multi-byte characters, holding a
// tracked lease of a partition with ':' in its key, is read back whole from the lease, and the ack
// releases the right partition.
func TestTrackedLeaseWithAwkwardConsumer(t *testing.T) {
	t.Parallel()
	const consumer = "a:b:ü:1"
	for _, p := range []partition.Key{partition.Ordered("x:ü"), "lim:1"} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			if !p.IsOrdered() {
				if err := b.eng.SetConcurrency(b.ctx, p, 1); err != nil {
					t.Fatal(err)
				}
			}
			b.publish(Message{ID: "first", Partition: p}, Message{ID: "second", Partition: p})
			ds := b.fetch(consumer, 1)
			if len(ds) != 1 || ds[0].ID != "first" {
				t.Fatalf("fetched %v, want the first task", ds)
			}
			if held := b.fetch("other", 1); len(held) != 0 {
				t.Fatalf("fetched %v from a held partition", held)
			}
			ti, err := b.eng.Task(b.ctx, "first")
			if err != nil || ti.Consumer != consumer || ti.State != StateLeased {
				t.Fatalf("task %+v, %v", ti, err)
			}
			if errs, _, err := b.eng.Extend(b.ctx, []Receipt{ds[0].Receipt()}, time.Minute); err != nil || errs[0] != nil {
				t.Fatalf("extend: %v %v", errs, err)
			}
			b.ack(ds...)
			if ds := b.fetch("other", 1); len(ds) != 1 || ds[0].ID != "second" {
				t.Fatalf("after the ack fetched %v, want the second task", ds)
			}
		})
	}
}
