package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// costBundle is a bundle on a server of the test's own, whose INFO commandstats times only the
// test's calls.
func costBundle(t *testing.T, why string) *bundle {
	t.Helper()
	srv := redistest.StartReal(t, why)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	b := &bundle{t: t, ctx: ctx, client: c, server: srv}
	b.eng = b.newEngine()
	if err := b.eng.LoadScripts(ctx); err != nil { // so every call is an EVALSHA
		t.Fatal(err)
	}
	return b
}

// newEngine returns an engine on a fresh queue of b's server.
func (b *bundle) newEngine() *Engine {
	b.t.Helper()
	e, err := New(b.client, Config{Queue: redistest.Queue(b.t)})
	if err != nil {
		b.t.Fatal(err)
	}
	return e
}

// scriptTime runs f and returns the time Redis spent in scripts meanwhile, by its commandstats.
func (b *bundle) scriptTime(f func()) time.Duration {
	b.t.Helper()
	before := readCmdStats(b.ctx, b.t, b.client)
	f()
	return time.Duration(readCmdStats(b.ctx, b.t, b.client).since(before).scripts().usec) * time.Microsecond
}

// within runs measure, which returns a cost and the cost it is compared with, up to 5 times, and
// fails t unless the cost is at most factor times the other once: a busy machine can slow one
// measurement, not every one.
func within(t *testing.T, factor float64, what string, measure func() (cost, base time.Duration)) {
	t.Helper()
	var cost, base time.Duration
	for range 5 {
		cost, base = measure()
		t.Logf("%s: %v against %v", what, cost, base)
		if float64(cost) <= factor*float64(base) {
			return
		}
	}
	t.Fatalf("%s: %v, more than %.1f times %v", what, cost, factor, base)
}

// TestRejectCostIgnoresItemOrder rejects a leased ordered run of 1,500 tasks in one call, last
// task first and first task first: each item of the first order used to read the partition's
// whole held set again, so that call cost the square of the run (0.8 s of Redis at 1,000). Its
// Redis time must stay within twice the other's, and both must leave every task pending in order.
func TestRejectCostIgnoresItemOrder(t *testing.T) {
	t.Parallel()
	b := costBundle(t, "times the scripts with INFO commandstats")
	const n = 1500
	p := partition.Ordered("run")
	rejectRun := func(tailFirst bool) time.Duration {
		b.eng = b.newEngine()
		ds := leaseRun(t, b, p, n)
		rs := make([]Rejection, n)
		for i := range ds {
			d := ds[i]
			if tailFirst {
				d = ds[n-1-i]
			}
			rs[i] = Rejection{Receipt: d.Receipt(), Reason: "r"}
		}
		var res []RejectResult
		took := b.scriptTime(func() {
			var err error
			if res, err = b.eng.Reject(b.ctx, rs); err != nil {
				t.Fatal(err)
			}
		})
		for i, r := range res {
			if r.Err != nil || r.DeadLettered {
				t.Fatalf("tail first %v: item %d: %+v", tailFirst, i, r)
			}
		}
		if st := b.stats(); st.Pending != n || st.InFlight != 0 || st.Rejected != n {
			t.Fatalf("tail first %v: %+v", tailFirst, st)
		}
		again := b.fetch("c", n)
		for i := range again {
			if again[i].ID != ds[i].ID {
				t.Fatalf("tail first %v: task %d is %s, want %s", tailFirst, i, again[i].ID, ds[i].ID)
			}
		}
		return took
	}
	within(t, 2, fmt.Sprintf("reject of a run of %d, tail first against head first", n), func() (time.Duration, time.Duration) {
		return rejectRun(true), rejectRun(false)
	})
}
