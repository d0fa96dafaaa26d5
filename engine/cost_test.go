package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// task first and first task first. A reject that read the partition's whole held set again for
// each item would cost the square of the run in the first order (0.8 s of Redis at 1,000): its
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

// fetchAckCost fetches and acks one task at a time k times from b's queue and returns the Redis
// time of those calls.
func (b *bundle) fetchAckCost(k int) time.Duration {
	b.t.Helper()
	return b.scriptTime(func() {
		for range k {
			ds := b.fetch("c", 1)
			if len(ds) != 1 {
				b.t.Fatalf("fetched %d tasks, want 1", len(ds))
			}
			b.ack(ds...)
		}
	})
}

// TestPriorityLevelsAreCapped publishes 20,000 distinct priorities into one partition, whose every
// fetch and ack would read each level's head (81 ms of Redis a call at 20,000 levels). Batches
// of 10,000 (MaxBatch) of them are refused before they are sent; sent one level a call, the first MaxPriorityLevels
// are added and every later one is refused by the script, writing nothing. The partition at the
// cap still takes tasks at its levels and at 0, and a fetch and ack of a task at priority 0 behind
// MaxPriorityLevels delayed levels, the most a fetch can have to look at, costs Redis at most
// twice what it costs in a partition of one level, unordered and ordered.
func TestPriorityLevelsAreCapped(t *testing.T) {
	t.Parallel()
	b := costBundle(t, "times the scripts with INFO commandstats")
	const n = 20_000
	p := partition.Key("p")
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprint("t", i), Partition: p, Priority: i + 1, Delay: time.Hour}
	}
	for lo := 0; lo < n; lo += MaxBatch { // the most messages one call may carry
		_, err := b.eng.Publish(b.ctx, msgs[lo:lo+MaxBatch])
		checkTooMany(t, err, p)
	}
	for i := range msgs {
		_, err := b.eng.Publish(b.ctx, msgs[i:i+1])
		if i < MaxPriorityLevels && err != nil {
			t.Fatalf("priority %d: %v", i+1, err)
		}
		if i >= MaxPriorityLevels {
			checkTooMany(t, err, p)
			if i > MaxPriorityLevels+100 {
				break // the rest go in batches of MaxPriorityLevels, refused by the script alike
			}
		}
	}
	for i := MaxPriorityLevels + 100; i < n; i += MaxPriorityLevels {
		_, err := b.eng.Publish(b.ctx, msgs[i:min(i+MaxPriorityLevels, n)])
		checkTooMany(t, err, p)
	}
	if st := b.stats(); st.Published != MaxPriorityLevels || st.Pending != MaxPriorityLevels {
		t.Fatalf("after the refusals: %+v; want the first %d tasks only", st, MaxPriorityLevels)
	}

	// At the cap, a task at one of its levels or at 0 is taken.
	b.publish(Message{Partition: p, Priority: 1, Delay: time.Hour}, Message{Partition: p})

	// Behind MaxPriorityLevels delayed levels, a fetch looks at the head of every level, and an
	// ordered partition's ack as well (place): the most either can cost.
	const k = 200
	for _, p := range []partition.Key{"p", partition.Ordered("o")} {
		atZero := make([]Message, k)
		for i := range atZero {
			atZero[i] = Message{Partition: p}
		}
		levels := make([]Message, MaxPriorityLevels)
		for i := range levels {
			levels[i] = Message{Partition: p, Priority: i + 1, Delay: time.Hour}
		}
		within(t, 2, fmt.Sprintf("fetch and ack in %q at the cap against one level", p), func() (time.Duration, time.Duration) {
			b.eng = b.newEngine()
			b.publish(append(levels, atZero...)...)
			capped := b.fetchAckCost(k)
			b.eng = b.newEngine()
			b.publish(atZero...)
			return capped, b.fetchAckCost(k)
		})
	}
}

// checkTooMany fails t unless err refuses a publish to p for its priorities, saying so.
func checkTooMany(t *testing.T, err error, p partition.Key) {
	t.Helper()
	if !errors.Is(err, ErrTooManyPriorities) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("publish: %v; want ErrTooManyPriorities", err)
	}
	if msg := err.Error(); !strings.Contains(msg, strconv.Quote(string(p))) || !strings.Contains(msg, strconv.Itoa(MaxPriorityLevels)) {
		t.Fatalf("the error %q names neither the partition nor the cap", msg)
	}
}
