package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/srqueue/srq/partition"
)

// TestRejectHandBack: a hand-back (Rejection.HandBack) returns its tasks to their places without
// using an attempt, counts each task once in HandedBack, with the later tasks of an ordered run it
// takes back, and nothing in Rejected or TakenBack, and writes handed_back events (for the tasks
// its items returned themselves), not retried ones; in whatever order the call names the tasks.
func TestRejectHandBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		order func(ds []Delivery) []Delivery
	}{
		{"in fetch order", func(ds []Delivery) []Delivery { return ds }},
		{"latest first", func(ds []Delivery) []Delivery {
			ds = slices.Clone(ds)
			slices.Reverse(ds)
			return ds
		}},
		{"only the run's first", func(ds []Delivery) []Delivery {
			// The rest of the ordered run goes back with it, and the unordered task stays leased.
			for _, d := range ds {
				if d.ID == "o0" {
					return []Delivery{d}
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{Events: 100})
			ordered := partition.Ordered("bob")
			var msgs []Message
			for i := range 3 {
				msgs = append(msgs, Message{ID: fmt.Sprintf("o%d", i), Partition: ordered})
			}
			msgs = append(msgs, Message{ID: "u", Partition: "x"})
			b.publish(msgs...)
			ds := b.fetch("c", 10)
			if len(ds) != 4 {
				t.Fatalf("fetched %d tasks, want 4", len(ds))
			}
			named := tc.order(ds)
			rs := make([]Rejection, len(named))
			for i, d := range named {
				rs[i] = Rejection{Receipt: d.Receipt(), HandBack: true}
			}
			res, err := b.eng.Reject(b.ctx, rs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil || r.DeadLettered {
					t.Fatalf("hand-back %d (%s): %+v", i, named[i].ID, r)
				}
			}
			back := int64(3) // the ordered run goes back whole
			if len(named) == 4 {
				back = 4
			}
			st := b.stats()
			if st.HandedBack != back || st.Rejected != 0 || st.TakenBack != 0 || st.Pending != back {
				t.Fatalf("handed back %d, rejected %d, taken back %d, pending %d; want %d, 0, 0, %d",
					st.HandedBack, st.Rejected, st.TakenBack, st.Pending, back, back)
			}
			for _, d := range ds {
				ti, err := b.eng.Task(b.ctx, d.ID)
				if err == nil && ti.State == StateLeased && back == 3 && d.ID == "u" {
					continue // not named: still leased, its delivery under way
				}
				if err != nil || ti.State != StatePending || ti.Attempts != 0 {
					t.Fatalf("%s after the hand-back: %+v, %v; want pending, no attempt used", d.ID, ti, err)
				}
			}
			evs, err := b.eng.Events(b.ctx, "0", 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []EventKind
			for _, ev := range evs {
				if ev.Kind != EventPublished {
					kinds = append(kinds, ev.Kind)
				}
			}
			for _, k := range kinds {
				if k != EventHandedBack {
					t.Fatalf("events %v: want handed_back only", kinds)
				}
			}
			if len(kinds) == 0 {
				t.Fatal("no handed_back event")
			}
			got := b.drain("c2")
			if want := []string{"o0", "o1", "o2"}; back == 3 && !slices.Equal(got, want) ||
				back == 4 && len(got) != 4 {
				t.Fatalf("drained %v after the hand-back", got)
			}
		})
	}
}
