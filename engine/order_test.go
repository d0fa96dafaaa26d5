package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

func idsOf(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func assertOrder(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
}

func TestOrderedPartitionKeepsPublishOrder(t *testing.T) {
	t.Parallel()
	p := partition.Ordered("user-42")

	t.Run("across batches, no explicit time", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		var want []string
		for batch := 0; batch < 4; batch++ {
			var msgs []Message
			for i := 0; i < 5; i++ {
				msgs = append(msgs, Message{ID: fmt.Sprintf("b%d-%d", batch, i), Partition: p})
			}
			want = append(want, b.publish(msgs...)...)
		}
		assertOrder(t, b.drain("c"), want)
	})

	t.Run("ids in reverse lexical order", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		var want []string
		for i := 30; i > 0; i-- {
			want = append(want, b.publish(Message{ID: fmt.Sprintf("z%02d", i), Partition: p})...)
		}
		assertOrder(t, b.drain("c"), want)
	})

	t.Run("equal explicit timestamps", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		at := time.UnixMilli(1_000_000) // long past: all equal and all available
		var want []string
		for i := 0; i < 20; i++ {
			want = append(want, b.publish(Message{ID: fmt.Sprintf("%02d", 20-i), Partition: p, At: at})...)
		}
		assertOrder(t, b.drain("c"), want)
	})

	t.Run("concurrent producers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{})
		const producers, each = 4, 50
		b.publishConcurrently(producers, each, func(g, i int) Message {
			return Message{ID: fmt.Sprintf("g%d-%03d", g, i), Partition: p}
		})
		// The publish sequence is the order: read it from the records, then drain.
		type seqID struct{ seq, id string }
		var bySeq []seqID
		for g := 0; g < producers; g++ {
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("g%d-%03d", g, i)
				ti, err := b.eng.Task(b.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				bySeq = append(bySeq, seqID{ti.Sequence, id})
			}
		}
		slices.SortFunc(bySeq, func(a, b seqID) int { return cmpString(a.seq, b.seq) })
		want := make([]string, len(bySeq))
		for i, s := range bySeq {
			want[i] = s.id
		}
		got := b.drain("c")
		assertOrder(t, got, want)
		// and each producer's own tasks came in the order it published them
		last := map[byte]string{}
		for _, id := range got {
			if prev := last[id[1]]; prev > id {
				t.Fatalf("producer %c: %s after %s", id[1], id, prev)
			}
			last[id[1]] = id
		}
	})

	for _, latestFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("after rejecting a run in one call, latest first=%v", latestFirst), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			var msgs []Message
			for i := 0; i < 6; i++ {
				msgs = append(msgs, Message{ID: fmt.Sprintf("r%d", i), Partition: p})
			}
			want := b.publish(msgs...)
			run := b.fetch("c", 5)
			assertOrder(t, idsOf(run), want[:5])
			// Reject them all at once: same millisecond, in either order. Each item reports OK,
			// also those an earlier item of the call already took back.
			var rs []Rejection
			for i := range run {
				k := i
				if latestFirst {
					k = len(run) - 1 - i
				}
				rs = append(rs, Rejection{Receipt: run[k].Receipt(), Reason: "try again"})
			}
			res, err := b.eng.Reject(b.ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || r.DeadLettered {
					t.Fatalf("reject %d: %+v", i, r)
				}
			}
			wantTaken := int64(4) // the first item takes the other four back
			if latestFirst {
				wantTaken = 0 // each item is the latest of the run still leased
			}
			if st := b.stats(); st.Rejected != 5 || st.TakenBack != wantTaken {
				t.Fatalf("rejected %d, taken back %d; want 5, %d", st.Rejected, st.TakenBack, wantTaken)
			}
			for _, d := range run {
				if ti, _ := b.eng.Task(b.ctx, d.ID); ti.Attempts != 1 || ti.LastError != "try again" {
					t.Fatalf("%s after the reject: %+v", d.ID, ti)
				}
			}
			assertOrder(t, b.drain("c2"), want)
		})
	}

	t.Run("counters near 2^53 and across the split", func(t *testing.T) {
		t.Parallel()
		for _, seed := range []string{"9007199254740985", "999999999999999990", "18446744073709551000"} {
			b := setup(t, Config{})
			if err := b.client.Set(b.ctx, b.eng.Keys().Seq(), seed, 0).Err(); err != nil {
				t.Fatal(err)
			}
			var msgs []Message
			for i := 0; i < 30; i++ {
				msgs = append(msgs, Message{ID: fmt.Sprintf("%02d", 30-i), Partition: p})
			}
			want := b.publish(msgs...)
			var got []string
			var lastToken Token
			for {
				ds := b.fetch("c", 3)
				if len(ds) == 0 {
					break
				}
				for _, d := range ds {
					if d.Token <= lastToken {
						t.Fatalf("seed %s: token %d after %d", seed, d.Token, lastToken)
					}
					lastToken = d.Token
					got = append(got, d.ID)
				}
				b.ack(ds...) // an inexact token would be refused here
			}
			assertOrder(t, got, want)
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestPriorities(t *testing.T) {
	t.Parallel()
	for _, p := range []partition.Key{partition.Ordered("o"), "u"} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.publish(
				Message{ID: "low-1", Partition: p},
				Message{ID: "high-1", Partition: p, Priority: 5},
				Message{ID: "low-2", Partition: p},
				Message{ID: "high-2", Partition: p, Priority: 5},
				Message{ID: "neg", Partition: p, Priority: -7},
				Message{ID: "late-top", Partition: p, Priority: 9, Delay: time.Hour},
			)
			// The delayed priority-9 task holds nothing back.
			assertOrder(t, b.drain("c"), []string{"high-1", "high-2", "low-1", "low-2", "neg"})
		})
	}
}

func TestFairness(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		for _, n := range []int{1, 10} {
			t.Run(fmt.Sprintf("ordered=%v/fetch=%d", ordered, n), func(t *testing.T) {
				t.Parallel()
				b := setup(t, Config{})
				// Partition by partition: p0's 20 tasks first, then p1's, ...
				for i := 0; i < 10; i++ {
					p := partition.Key(fmt.Sprintf("p%d", i))
					if ordered {
						p = partition.Ordered(p.String())
					}
					var msgs []Message
					for j := 0; j < 20; j++ {
						msgs = append(msgs, Message{Partition: p})
					}
					b.publish(msgs...)
				}
				touched := map[partition.Key]int{}
				delivered := 0
				for delivered < 50 {
					ds := b.fetch("c", min(n, 50-delivered))
					if len(ds) == 0 {
						t.Fatal("ran dry")
					}
					for _, d := range ds {
						touched[d.Partition]++
					}
					delivered += len(ds)
					b.ack(ds...)
				}
				if len(touched) != 10 {
					t.Fatalf("first 50 deliveries touched %d partitions: %v", len(touched), touched)
				}
				for p, k := range touched {
					if k > 5+n {
						t.Errorf("partition %s got %d of the first 50 deliveries", p, k)
					}
				}
			})
		}
	}
}

// TestAckFetchServesTheReleasedPartition: acking the last leased task of an ordered partition
// releases it, and the fetch in the same AckFetch call can take its next tasks at once; a stale
// receipt in the call is refused without stopping the fetch.
func TestAckFetchServesTheReleasedPartition(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("user")
	b.publish(Message{ID: "1", Partition: p}, Message{ID: "2", Partition: p}, Message{ID: "3", Partition: p})
	first := b.fetch("c", 1)
	if len(first) != 1 || first[0].ID != "1" {
		t.Fatalf("first fetch %+v", first)
	}
	if ds := b.fetch("other", 5); len(ds) != 0 {
		t.Fatalf("the held partition handed out %+v", ds)
	}
	stale := first[0].Receipt()
	stale.Token--
	errs, ds, nextDue, err := b.eng.AckFetch(b.ctx, []Receipt{stale, first[0].Receipt()}, "c", 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || !errors.Is(errs[0], ErrStaleToken) || errs[1] != nil {
		t.Fatalf("ack results %v", errs)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.ID)
	}
	if strings.Join(got, ",") != "2,3" || nextDue != 0 {
		t.Fatalf("fetched %v (next due %v), want 2,3 in order", got, nextDue)
	}
	errs, ds, _, err = b.eng.AckFetch(b.ctx, []Receipt{ds[0].Receipt(), ds[1].Receipt()}, "c", 5, time.Minute)
	if err != nil || len(ds) != 0 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("last AckFetch: %v %+v %v", errs, ds, err)
	}
	if s := b.stats(); s.Acked != 3 || s.Pending != 0 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, _, _, err := b.eng.AckFetch(b.ctx, nil, "", 1, time.Minute); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty consumer: %v", err)
	}
}

// TestAckFetchKeepsDueTimeWakeUps: the ack part of AckFetch releases an ordered partition whose next
// task is delayed, earlier than anything scheduled; sleepers must be woken to wait for that time,
// as a plain Ack wakes them, although the fetch part found nothing ready.
func TestAckFetchKeepsDueTimeWakeUps(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("user")
	b.publish(Message{ID: "1", Partition: p}, Message{ID: "2", Partition: p, Delay: time.Hour})
	first := b.fetch("c", 1)
	if err := b.client.Del(b.ctx, b.eng.Keys().Wake()).Err(); err != nil {
		t.Fatal(err)
	}
	_, ds, nextDue, err := b.eng.AckFetch(b.ctx, []Receipt{first[0].Receipt()}, "c", 2, time.Minute)
	if err != nil || len(ds) != 0 || nextDue <= 0 {
		t.Fatalf("AckFetch: %+v, next due %v, %v", ds, nextDue, err)
	}
	if n, err := b.client.LLen(b.ctx, b.eng.Keys().Wake()).Result(); err != nil || n != 1 {
		t.Fatalf("%d wake-up tokens, %v; want 1 for the new earliest due time", n, err)
	}
}

// TestAckOfARunsFirstLeaseKeepsThePartitionHeld: acking the first task of a run of three leaves
// the ordered partition held until the other two are acked; acking a lease taken alone frees it.
func TestAckOfARunsFirstLeaseKeepsThePartitionHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("user")
	b.publish(Message{ID: "1", Partition: p}, Message{ID: "2", Partition: p}, Message{ID: "3", Partition: p},
		Message{ID: "4", Partition: p})

	run := b.fetch("a", 3)
	assertOrder(t, idsOf(run), []string{"1", "2", "3"})
	b.ack(run[0])
	if ds := b.fetch("b", 5); len(ds) != 0 {
		t.Fatalf("acking the run's first task freed the partition: b got %v", idsOf(ds))
	}
	b.ack(run[1:]...)

	alone := b.fetch("a", 1)
	assertOrder(t, idsOf(alone), []string{"4"})
	b.publish(Message{ID: "5", Partition: p})
	if ds := b.fetch("b", 5); len(ds) != 0 {
		t.Fatalf("the held partition handed out %v", idsOf(ds))
	}
	b.ack(alone...)
	assertOrder(t, b.drain("b"), []string{"5"})
	b.assertNoTaskKeys()
}
