package engine

import (
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// A task of an ordered partition leased in a run behind another is cancelled while leased (Cancel
// reports it Running: its holder is told at the next extension). Before that extension the task
// ahead of it fails and is rejected, which takes the run's later tasks back: the cancelled one
// ends cancelled rather than going back, and is never delivered again.
func TestCancelledLeaseTakenBackByRejectStaysCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("acct")
	ids := b.publish(Message{Partition: p, Payload: []byte("1")}, Message{Partition: p, Payload: []byte("2")},
		Message{Partition: p, Payload: []byte("3")})
	ds := b.fetch("c", 3)
	if len(ds) != 3 {
		t.Fatalf("fetched %d tasks, want the run of 3", len(ds))
	}
	res, err := b.eng.Cancel(b.ctx, []string{ids[1]}, "not wanted")
	if err != nil || res[0].Err != nil || !res[0].Running {
		t.Fatalf("Cancel of the second, leased: %+v, %v", res, err)
	}
	rr, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: "boom"}})
	if err != nil || rr[0].Err != nil || rr[0].DeadLettered {
		t.Fatalf("Reject of the first: %+v, %v", rr, err)
	}
	if got := b.drain("c"); len(got) != 2 || got[0] != ids[0] || got[1] != ids[2] {
		t.Fatalf("after the reject ran %v, want %s and %s: the cancelled %s must not run", got, ids[0], ids[2], ids[1])
	}
	if st := b.stats(); st.Cancelled != 1 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// A leased task is cancelled (Cancel reports it Running) and its handler fails before the next
// extension tells it: the worker rejects it, and it ends cancelled, not retried; an ordered
// partition goes on with the tasks leased behind it, which go back to their places.
func TestCancelledLeaseRejectedIsNotRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    partition.Key
	}{{"unordered", ""}, {"ordered", partition.Ordered("o")}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			ids := b.publish(Message{Partition: tc.p, KeepOutcome: time.Minute}, Message{Partition: tc.p})
			ds := b.fetch("c", 2)
			if len(ds) != 2 {
				t.Fatalf("fetched %d", len(ds))
			}
			res, err := b.eng.Cancel(b.ctx, ids[:1], "not wanted")
			if err != nil || !res[0].Running {
				t.Fatalf("Cancel: %+v, %v", res, err)
			}
			rr, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: "handler failed"}})
			if err != nil || rr[0].Err != nil || rr[0].DeadLettered {
				t.Fatalf("Reject: %+v, %v", rr, err)
			}
			if tc.p.IsOrdered() {
				if got := b.drain("c"); len(got) != 1 || got[0] != ids[1] {
					t.Fatalf("ran %v, want only %s", got, ids[1])
				}
			} else {
				if got := b.drain("c"); len(got) != 0 {
					t.Fatalf("the cancelled task was delivered again: %v", got)
				}
				b.ack(ds[1])
			}
			if o, err := b.eng.Outcome(b.ctx, ids[0]); err != nil || o.State != StateCancelled {
				t.Fatalf("outcome: %+v, %v; want cancelled", o, err)
			}
		})
	}
}

// A task asked to be cancelled while leased whose handler fails for good before the next
// extension tells it (Kill) ends cancelled, as one rejected does: it is no dead letter, and does
// not hold its ordered partition, which goes on.
func TestCancelledLeaseKilledEndsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("ledger")
	ids := b.publish(Message{Partition: p, HoldOnDead: true, KeepOutcome: time.Minute}, Message{Partition: p, HoldOnDead: true})
	ds := b.fetch("c", 1)
	if len(ds) != 1 || ds[0].ID != ids[0] {
		t.Fatalf("fetched %v", ds)
	}
	if res, err := b.eng.Cancel(b.ctx, ids[:1], "not wanted"); err != nil || !res[0].Running {
		t.Fatalf("Cancel: %+v, %v", res, err)
	}
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "broke"}}); err != nil || errs[0] != nil {
		t.Fatalf("Kill: %v, %v", errs, err)
	}
	if got := b.drain("c"); len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("after the kill ran %v, want %s: the partition must go on", got, ids[1])
	}
	if o, err := b.eng.Outcome(b.ctx, ids[0]); err != nil || o.State != StateCancelled {
		t.Fatalf("outcome: %+v, %v; want cancelled", o, err)
	}
	if st := b.stats(); st.Dead != 0 || st.Cancelled != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// data-model.md, reject.lua: `rejected` counts the OK items "that are neither hand-backs, waits nor
// cancellations": a wait (a sleep here) and the reject of a task asked to be cancelled while leased
// leave the counter as it was; a plain reject beside them counts one.
func TestRejectCountsNeitherWaitsNorCancellations(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ids := b.publish(Message{Partition: "a"}, Message{Partition: "b"}, Message{Partition: "c"})
	ds := b.fetch("c", 3)
	if len(ds) != 3 {
		t.Fatalf("fetched %d tasks, want 3", len(ds))
	}
	byID := map[string]*Delivery{}
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	if res, err := b.eng.Cancel(b.ctx, []string{ids[1]}, "not wanted"); err != nil || res[0].Err != nil || !res[0].Running {
		t.Fatalf("Cancel of a leased task: %+v, %v", res, err)
	}
	rr, err := b.eng.Reject(b.ctx, []Rejection{
		{Receipt: byID[ids[0]].Receipt(), Delay: time.Hour, Wait: &Wait{Kind: WaitSleep}},
		{Receipt: byID[ids[1]].Receipt(), Reason: "boom"},
		{Receipt: byID[ids[2]].Receipt(), Reason: "boom"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rr {
		if r.Err != nil || r.DeadLettered {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	if st := b.stats(); st.Rejected != 1 || st.Cancelled != 1 {
		t.Fatalf("Rejected %d, Cancelled %d; want 1 (the plain reject) and 1", st.Rejected, st.Cancelled)
	}
}

// A reject that dead-letters its task (out of attempts) counts in DeadLettered, not Rejected; a
// kill keeps the killed delivery's attempt (guarantees.md, Reject and Attempts).
func TestRejectOutOfAttemptsCountsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "once", MaxAttempts: 1}, Message{ID: "killed"})
	ds := b.fetch("w", 2)
	res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: "no"}})
	if err != nil || res[0].Err != nil || !res[0].DeadLettered {
		t.Fatalf("reject out of attempts: %+v %v, want dead-lettered", res, err)
	}
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[1].Receipt(), Reason: "no"}}); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(); st.Rejected != 0 || st.DeadLettered != 2 {
		t.Errorf("rejected %d, dead-lettered %d; want 0 and 2", st.Rejected, st.DeadLettered)
	}
	if info, err := b.eng.Task(b.ctx, "killed"); err != nil || info.Attempts != 1 {
		t.Errorf("a task killed on its first delivery: %d attempts, %v; want 1", info.Attempts, err)
	}
}
