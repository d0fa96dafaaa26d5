package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestHoldBySeveralDeadLetters: tasks of an ordered partition published to hold it on death that
// die together (a run leased at once, killed in one call or one by one) hold it until each of
// them is requeued or deleted, or the partition is resumed: the first holds it (HeldBy), the
// others wait to hold it after, and a requeued one goes back to its own place.
func TestHoldBySeveralDeadLetters(t *testing.T) {
	t.Parallel()
	const p = partition.Key("!acct")
	for _, tt := range []struct {
		name    string
		oneCall bool            // kill a and b in one call
		release func(b *bundle) // the first release
		heldBy  string          // the holder after it ("": none)
		finish  func(b *bundle) // the second release
		want    []string        // handed out after both
	}{
		{name: "requeue the holder, then the other", release: requeue("a"), heldBy: "b", finish: requeue("b"), want: []string{"a", "b", "c"}},
		{name: "requeue the other, then the holder", release: requeue("b"), heldBy: "a", finish: requeue("a"), want: []string{"a", "b", "c"}},
		{name: "killed in one call", oneCall: true, release: requeue("a"), heldBy: "b", finish: requeue("b"), want: []string{"a", "b", "c"}},
		{name: "purge both", release: purge("a"), heldBy: "b", finish: purge("b"), want: []string{"c"}},
		{name: "purge the other, requeue the holder", release: purge("b"), heldBy: "a", finish: requeue("a"), want: []string{"a", "c"}},
		{name: "resume", release: func(b *bundle) {
			if err := b.eng.Resume(b.ctx, p); err != nil {
				b.t.Fatal(err)
			}
		}, want: []string{"c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.publish(Message{ID: "a", Partition: p, HoldOnDead: true}, Message{ID: "b", Partition: p, HoldOnDead: true},
				Message{ID: "c", Partition: p, HoldOnDead: true})
			ds := b.fetch("w", 2) // the run a, b
			if len(ds) != 2 {
				t.Fatalf("fetched %d tasks, want the run of 2", len(ds))
			}
			fs := []Failure{{Receipt: ds[0].Receipt(), Reason: "a died"}, {Receipt: ds[1].Receipt(), Reason: "b died"}}
			if tt.oneCall {
				if _, err := b.eng.Kill(b.ctx, fs); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, f := range fs {
					if errs, err := b.eng.Kill(b.ctx, []Failure{f}); err != nil || errs[0] != nil {
						t.Fatal(errs, err)
					}
				}
			}
			if got := b.heldBy(p); got != "a" {
				t.Fatalf("held by %q after both died, want a", got)
			}
			// b waits to hold it: m:<p> field hq, each id as its length, ':' and the id.
			if hq, err := b.client.HGet(b.ctx, b.eng.Keys().Meta(p), "hq").Result(); err != nil || hq != "1:b" {
				t.Fatalf("hq %q, %v; want 1:b", hq, err)
			}
			tt.release(b)
			if got := b.heldBy(p); got != tt.heldBy {
				t.Fatalf("held by %q after the first release, want %q", got, tt.heldBy)
			}
			if tt.heldBy != "" {
				if ds := b.fetch("w", 10); len(ds) != 0 {
					t.Fatalf("a partition still held handed out %s", ds[0].ID)
				}
				tt.finish(b)
				if got := b.heldBy(p); got != "" {
					t.Fatalf("held by %q after both releases", got)
				}
			}
			if got := b.drainOneByOne(); !slices.Equal(got, tt.want) {
				t.Fatalf("handed out %v, want %v", got, tt.want)
			}
		})
	}
}

func requeue(id string) func(b *bundle) {
	return func(b *bundle) {
		if errs, err := b.eng.Requeue(b.ctx, []string{id}); err != nil || errs[0] != nil {
			b.t.Fatal(errs, err)
		}
	}
}

func purge(id string) func(b *bundle) {
	return func(b *bundle) {
		if n, err := b.eng.Purge(b.ctx, []string{id}); err != nil || n != 1 {
			b.t.Fatal(n, err)
		}
	}
}

// heldBy is the dead letter that holds partition p ("" for none).
func (b *bundle) heldBy(p partition.Key) string {
	b.t.Helper()
	infos, _, err := b.eng.Partitions(b.ctx, p)
	if err != nil || len(infos) != 1 {
		b.t.Fatal(infos, err)
	}
	return infos[0].HeldBy
}

// drainOneByOne fetches one task at a time and acks it, until a fetch finds none: the order an
// ordered partition hands its tasks out.
func (b *bundle) drainOneByOne() []string {
	b.t.Helper()
	var got []string
	for {
		ds, err := b.eng.Fetch(b.ctx, "w", 1, time.Minute)
		if err != nil {
			b.t.Fatal(err)
		}
		if len(ds) == 0 {
			return got
		}
		got = append(got, ds[0].ID)
		b.ack(ds...)
	}
}
