package inspect

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// seedDead dead-letters n tasks per partition of parts, reasons alternating "Timeout #i" and
// "bad input #i", in the order tasks were fetched; it returns the ids newest first.
func (b *bundle) seedDead(n int, parts ...partition.Key) []string {
	b.t.Helper()
	for _, p := range parts {
		b.publish(msgs("d"+string(p)+"-", p, n)...)
	}
	var order []string
	for i, d := range b.fetchAll("w", time.Minute) {
		reason := fmt.Sprintf("bad input #%d", i)
		if i%2 == 0 {
			reason = fmt.Sprintf("Timeout #%d", i)
		}
		b.kill(d, reason)
		order = append(order, d.ID)
	}
	slices.Reverse(order)
	return order
}

func TestDeadLettersPagingAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	newest := b.seedDead(5, "a", "b", partition.Base)

	// Unfiltered pages of 4 come back full, newest first, until the letters run out.
	got := b.allDead(DeadQuery{Limit: 4})
	if g := ids(got, func(d DeadLetter) string { return d.ID }); g != ids(newest, func(s string) string { return s }) {
		t.Fatalf("pages %q, want %q", g, newest)
	}
	first, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{Limit: 4})
	if err != nil || len(first.Letters) != 4 || first.Total != 15 || first.Next == "" {
		t.Fatalf("first page %+v %v", first, err)
	}
	d := first.Letters[0]
	if d.Attempts != 1 || d.Error == "" || d.DiedAt.IsZero() || d.EnqueuedAt.IsZero() || string(d.Payload) != "payload-"+d.ID {
		t.Fatalf("letter %+v", d)
	}

	// By partition, with a window of 3 letters a call: pages may be short, the cursor goes on.
	var wantA []string
	for _, id := range newest {
		if id[:3] == "da-" {
			wantA = append(wantA, id)
		}
	}
	got = b.allDead(DeadQuery{Partition: "a", Limit: 2, Window: 3})
	if g := ids(got, func(d DeadLetter) string { return d.ID }); g != ids(wantA, func(s string) string { return s }) {
		t.Fatalf("partition a: %q, want %q", g, wantA)
	}
	got = b.allDead(DeadQuery{BasePartition: true, Limit: 50})
	if len(got) != 5 || got[0].Partition != partition.Base {
		t.Fatalf("base partition: %+v", got)
	}

	// By error, ignoring case: "timeout" matches the even ones.
	got = b.allDead(DeadQuery{ErrorContains: "TIMEOUT", Limit: 3, Window: 4})
	if len(got) != 8 {
		t.Fatalf("%d letters with a timeout, want 8", len(got))
	}
	for _, d := range got {
		if d.Error[:7] != "Timeout" {
			t.Fatalf("filtered letter %+v", d)
		}
	}
	// A window below the page size: each call looks at that many letters and no more, so a page
	// holds at most the window's letters, and paging still finds them all. The newest three
	// letters are fetches 14, 13 and 12 (two timeouts), the next three 11, 10 and 9 (one).
	w, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{ErrorContains: "timeout", Window: 3})
	if err != nil || len(w.Letters) != 2 || w.Letters[0].ID != newest[0] || w.Letters[1].ID != newest[2] || w.Next == "" {
		t.Fatalf("window 3 of the default page: %+v, %v; want %s and %s, and a next", w, err, newest[0], newest[2])
	}
	w, err = b.in.DeadLetters(b.ctx, b.queue, DeadQuery{ErrorContains: "timeout", Window: 3, Cursor: w.Next})
	if err != nil || len(w.Letters) != 1 || w.Letters[0].ID != newest[4] || w.Next == "" {
		t.Fatalf("window 3, second page: %+v, %v; want %s, and a next", w, err, newest[4])
	}
	if got := b.allDead(DeadQuery{ErrorContains: "timeout", Window: 2}); len(got) != 8 {
		t.Fatalf("window 2: %d letters with a timeout over all pages, want 8", len(got))
	}
	got = b.allDead(DeadQuery{Partition: "b", ErrorContains: "bad input", Limit: 10})
	for _, d := range got {
		if d.Partition != "b" || d.Error[:3] != "bad" {
			t.Fatalf("filtered letter %+v", d)
		}
	}

	for _, q := range []DeadQuery{
		{Cursor: "nonsense"}, {Cursor: "2:,"}, {Cursor: "1:-5"}, {Limit: MaxLimit + 1},
		{Partition: "a", BasePartition: true}, {ErrorContains: "x", Window: MaxDeadWindow + 1},
	} {
		_, err := b.in.DeadLetters(b.ctx, b.queue, q)
		mustErr(t, err, engine.ErrInvalid)
	}
}

func TestRequeueAndPurgeDead(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		sel     func(newest []string) DeadSelector
		want    int
		remains func(d DeadLetter) bool // which letters stay dead
	}{
		{"one id", func(n []string) DeadSelector { return DeadSelector{IDs: n[:1]} }, 1, nil},
		{"ids with unknown", func(n []string) DeadSelector { return DeadSelector{IDs: []string{n[0], n[1], "nope"}} }, 2, nil},
		{"by partition", func([]string) DeadSelector { return DeadSelector{Filter: &DeadQuery{Partition: "a"}} }, 4,
			func(d DeadLetter) bool { return d.Partition != "a" }},
		{"by error", func([]string) DeadSelector { return DeadSelector{Filter: &DeadQuery{ErrorContains: "timeout"}} }, 4,
			func(d DeadLetter) bool { return d.Error[:3] == "bad" }},
		{"all", func([]string) DeadSelector { return DeadSelector{All: true} }, 8, func(DeadLetter) bool { return false }},
	} {
		for _, action := range []string{"requeue", "purge"} {
			t.Run(tt.name+"/"+action, func(t *testing.T) {
				t.Parallel()
				b := setup(t, 1)
				newest := b.seedDead(4, "a", "b")
				sel := tt.sel(newest)
				before := b.allDead(DeadQuery{Limit: 100})
				var n int
				var err error
				if action == "requeue" {
					n, err = b.in.RequeueDead(b.ctx, b.queue, sel)
				} else {
					n, err = b.in.PurgeDead(b.ctx, b.queue, sel)
				}
				if err != nil || n != tt.want {
					t.Fatalf("%s: %d, %v; want %d", action, n, err, tt.want)
				}
				after := b.allDead(DeadQuery{Limit: 100})
				var want []string
				for _, d := range before {
					stays := !slices.Contains(sel.IDs, d.ID)
					if tt.remains != nil {
						stays = tt.remains(d)
					}
					if stays {
						want = append(want, d.ID)
					}
				}
				if g := ids(after, func(d DeadLetter) string { return d.ID }); g != ids(want, func(s string) string { return s }) {
					t.Fatalf("left %q, want %q", g, want)
				}
				s, err := b.in.Stats(b.ctx, b.queue)
				if err != nil {
					t.Fatal(err)
				}
				if action == "requeue" && (s.Pending != int64(n) || s.Requeued != int64(n)) {
					t.Fatalf("after requeue: pending %d requeued %d, want %d", s.Pending, s.Requeued, n)
				}
				if action == "purge" && (s.Pending != 0 || s.Purged != int64(n)) {
					t.Fatalf("after purge: pending %d purged %d, want 0 and %d", s.Pending, s.Purged, n)
				}
			})
		}
	}
}

func TestDeadSelectorNeedsExactlyOne(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	for _, sel := range []DeadSelector{{}, {IDs: []string{"a"}, All: true}, {Filter: &DeadQuery{}, All: true}} {
		_, err := b.in.RequeueDead(b.ctx, b.queue, sel)
		mustErr(t, err, engine.ErrInvalid)
		_, err = b.in.PurgeDead(b.ctx, b.queue, sel)
		mustErr(t, err, engine.ErrInvalid)
	}
	_, err := b.in.PurgeDead(b.ctx, b.queue, DeadSelector{Filter: &DeadQuery{Partition: "a", BasePartition: true}})
	mustErr(t, err, engine.ErrInvalid)
}
