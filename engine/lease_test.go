package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

const shortLease = 100 * time.Millisecond

// expire waits until the leases of ds have passed on the server's clock.
func (b *bundle) expire(ds []Delivery) {
	b.t.Helper()
	var last time.Time
	for _, d := range ds {
		ti, err := b.eng.Task(b.ctx, d.ID)
		if err != nil {
			b.t.Fatal(err)
		}
		if ti.LeaseEnds.After(last) {
			last = ti.LeaseEnds
		}
	}
	b.waitServerPast(last)
}

func TestLeaseExpiryReturnsTaskAndRefusesOldHolder(t *testing.T) {
	t.Parallel()
	for _, p := range []partition.Key{partition.Ordered("o"), "u"} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.publish(Message{ID: "t1", Partition: p})
			old, err := b.eng.Fetch(b.ctx, "slow", 1, shortLease)
			if err != nil || len(old) != 1 {
				t.Fatalf("fetch: %v %v", old, err)
			}
			b.expire(old)
			rec, err := b.eng.Recover(b.ctx)
			if err != nil || rec.Returned != 1 {
				t.Fatalf("recover: %+v %v", rec, err)
			}
			fresh := b.fetch("fast", 1)
			if len(fresh) != 1 || fresh[0].ID != "t1" || fresh[0].Attempt != 2 || fresh[0].Crashes != 1 {
				t.Fatalf("redelivery %+v", fresh)
			}
			if fresh[0].Token <= old[0].Token {
				t.Fatalf("token %d did not grow past %d", fresh[0].Token, old[0].Token)
			}
			r := old[0].Receipt()
			if errs, err := b.eng.Ack(b.ctx, []Receipt{r}); err != nil || !errors.Is(errs[0], ErrStaleToken) {
				t.Fatalf("old holder's ack: %v %v", errs, err)
			}
			if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: r}}); err != nil || !errors.Is(res[0].Err, ErrStaleToken) {
				t.Fatalf("old holder's reject: %v %v", res, err)
			}
			if errs, _, err := b.eng.Extend(b.ctx, []Receipt{r}, time.Minute); err != nil || !errors.Is(errs[0], ErrStaleToken) {
				t.Fatalf("old holder's extend: %v %v", errs, err)
			}
			if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: r}}); err != nil || !errors.Is(errs[0], ErrStaleToken) {
				t.Fatalf("old holder's kill: %v %v", errs, err)
			}
			// The refused calls changed nothing: the new holder still completes the task.
			b.ack(fresh...)
			if s := b.stats(); s.Pending != 0 || s.InFlight != 0 || s.Dead != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestExtendKeepsLease(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine does not stall an iteration past it.
	const lease = 500 * time.Millisecond
	b := setup(t, Config{})
	b.publish(Message{ID: "t1"})
	ds, err := b.eng.Fetch(b.ctx, "c", 1, lease)
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	start := b.serverNow()
	for b.serverNow().Before(start.Add(3 * lease)) {
		errs, _, err := b.eng.Extend(b.ctx, []Receipt{ds[0].Receipt()}, lease)
		if err != nil || errs[0] != nil {
			t.Fatalf("extend: %v %v", errs, err)
		}
		if rec, err := b.eng.Recover(b.ctx); err != nil || rec.Returned != 0 {
			t.Fatalf("an extended lease was recovered: %+v %v", rec, err)
		}
		time.Sleep(lease / 5) // pacing the extender, as a worker does; the asserts wait on nothing
	}
	b.ack(ds...)
}

func TestCrashedConsumerTasksAllComeBack(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	want := map[partition.Key][]string{}
	var msgs []Message
	for _, p := range []partition.Key{partition.Ordered("a"), partition.Ordered("b"), "u", ""} {
		for i := 0; i < 4; i++ {
			id := fmt.Sprintf("%s-%d", p, i)
			msgs = append(msgs, Message{ID: id, Partition: p})
			want[p] = append(want[p], id)
		}
	}
	b.publish(msgs...)
	crashed, err := b.eng.Fetch(b.ctx, "crashed", 12, shortLease)
	if err != nil || len(crashed) != 12 {
		t.Fatalf("fetch %d: %v", len(crashed), err)
	}
	b.expire(crashed)
	rec, err := b.eng.RecoverAll(b.ctx)
	if err != nil || rec.Returned != 12 {
		t.Fatalf("recover %+v %v", rec, err)
	}
	if s := b.stats(); s.Pending != 16 || s.InFlight != 0 {
		t.Fatalf("stats after recovery %+v", s)
	}
	got := map[partition.Key][]string{}
	for _, id := range b.drain("survivor") {
		ti := msgs[0]
		for _, m := range msgs {
			if m.ID == id {
				ti = m
			}
		}
		got[ti.Partition] = append(got[ti.Partition], id)
	}
	for _, p := range []partition.Key{partition.Ordered("a"), partition.Ordered("b")} {
		assertOrder(t, got[p], want[p])
	}
	for _, p := range []partition.Key{"u", ""} {
		if len(got[p]) != 4 {
			t.Fatalf("partition %q: got %v", p, got[p])
		}
	}
}

// TestRecoveryTakesBackTheWholeOrderedRun: when one task of a held ordered partition expires, every
// leased task of that partition returns, so the old holder cannot complete a later task before the
// earlier one is done again.
func TestRecoveryTakesBackTheWholeOrderedRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("p")
	want := b.publish(Message{ID: "1", Partition: p}, Message{ID: "2", Partition: p}, Message{ID: "3", Partition: p})
	run, err := b.eng.Fetch(b.ctx, "A", 3, shortLease)
	if err != nil || len(run) != 3 {
		t.Fatal(run, err)
	}
	// A keeps extending the last two but not the first.
	rest := []Receipt{run[1].Receipt(), run[2].Receipt()}
	b.expire(run[:1])
	if _, _, err := b.eng.Extend(b.ctx, rest, time.Minute); err != nil {
		t.Fatal(err)
	}
	rec, err := b.eng.Recover(b.ctx)
	if err != nil || rec.Returned != 3 {
		t.Fatalf("recover %+v %v, want all 3 back", rec, err)
	}
	if errs, err := b.eng.Ack(b.ctx, rest); err != nil || !errors.Is(errs[0], ErrStaleToken) || !errors.Is(errs[1], ErrStaleToken) {
		t.Fatalf("A's acks after losing the partition: %v %v", errs, err)
	}
	assertOrder(t, b.drain("B"), want)
}

func TestRecoverIsIdempotentAndChunked(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RecoverChunk: 3})
	var msgs []Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, Message{})
	}
	b.publish(msgs...)
	ds, err := b.eng.Fetch(b.ctx, "c", 10, shortLease)
	if err != nil || len(ds) != 10 {
		t.Fatal(err)
	}
	b.expire(ds)
	first, err := b.eng.Recover(b.ctx)
	if err != nil || first.Returned != 3 || !first.More {
		t.Fatalf("first chunk %+v %v", first, err)
	}
	rest, err := b.eng.RecoverAll(b.ctx)
	if err != nil || rest.Returned != 7 || rest.More {
		t.Fatalf("rest %+v %v", rest, err)
	}
	again, err := b.eng.RecoverAll(b.ctx)
	if err != nil || again.Returned != 0 {
		t.Fatalf("second run %+v %v", again, err)
	}
	if s := b.stats(); s.Pending != 10 || s.InFlight != 0 || s.Recovered != 10 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCrashIsNotAttempt(t *testing.T) {
	t.Parallel()
	for _, notAttempt := range []bool{false, true} {
		t.Run(fmt.Sprint(notAttempt), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{CrashIsNotAttempt: notAttempt})
			b.publish(Message{ID: "t", MaxAttempts: 1})
			ds, err := b.eng.Fetch(b.ctx, "c", 1, shortLease)
			if err != nil || len(ds) != 1 {
				t.Fatal(err)
			}
			b.expire(ds)
			rec, err := b.eng.Recover(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if notAttempt {
				if rec.Returned != 1 {
					t.Fatalf("%+v: want the task back", rec)
				}
				ds = b.fetch("c", 1)
				if len(ds) != 1 || ds[0].Attempt != 1 || ds[0].Crashes != 1 {
					t.Fatalf("redelivery %+v", ds)
				}
			} else if rec.DeadLettered != 1 {
				t.Fatalf("%+v: want the task dead-lettered after its one attempt", rec)
			}
		})
	}
}

// Delivery.LeaseDeadline and Extend's deadline are never later than the server's deadline
// (guarantees.md), although the server's clock drops its microseconds: checked over 20 fetches and
// 20 extends, each of which would have been up to a millisecond late without the allowance.
func TestLocalDeadlineNeverLaterThanServers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const lease = 10*time.Second + 700*time.Microsecond // the server counts whole milliseconds
	for i := range 20 {
		b.publish(Message{ID: fmt.Sprint("t", i)})
		ds, err := b.eng.Fetch(b.ctx, "c", 1, lease)
		if err != nil || len(ds) != 1 {
			t.Fatal(ds, err)
		}
		info, err := b.eng.Task(b.ctx, ds[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].LeaseDeadline.After(info.LeaseEnds) {
			t.Errorf("fetch %d: LeaseDeadline %v is after the server's %v", i, ds[0].LeaseDeadline, info.LeaseEnds)
		}
		errs, deadline, err := b.eng.Extend(b.ctx, []Receipt{ds[0].Receipt()}, lease)
		if err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		if info, err = b.eng.Task(b.ctx, ds[0].ID); err != nil {
			t.Fatal(err)
		}
		if deadline.After(info.LeaseEnds) {
			t.Errorf("extend %d: deadline %v is after the server's %v", i, deadline, info.LeaseEnds)
		}
		b.ack(ds...)
	}
}
