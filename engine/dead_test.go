package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"

	"github.com/srqueue/srq/partition"
)

func TestMaxAttemptsDeadLetterAndRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("p")
	b.publish(Message{ID: "flaky", Partition: p, MaxAttempts: 2, Headers: map[string]string{"trace": "x"}, Payload: []byte("body")},
		Message{ID: "next", Partition: p})
	for attempt := 1; attempt <= 2; attempt++ {
		ds := b.fetch("c", 1)
		if len(ds) != 1 || ds[0].ID != "flaky" || ds[0].Attempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, ds)
		}
		res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: fmt.Sprintf("boom %d", attempt)}})
		if err != nil || res[0].Err != nil || res[0].DeadLettered != (attempt == 2) {
			t.Fatalf("attempt %d reject: %+v %v", attempt, res, err)
		}
	}
	// The partition goes on with the next task.
	assertOrder(t, b.drain("c"), []string{"next"})

	page, err := b.eng.DeadLetters(b.ctx, 0, 10)
	if err != nil || page.Total != 1 || len(page.Letters) != 1 {
		t.Fatalf("dead letters %+v %v", page, err)
	}
	d := page.Letters[0]
	if d.ID != "flaky" || d.LastError != "boom 2" || d.Attempts != 2 || d.MaxAttempts != 2 || d.Partition != p ||
		string(d.Payload) != "body" || d.Headers["trace"] != "x" {
		t.Fatalf("dead letter %+v", d)
	}
	if since := b.serverNow().Sub(d.DiedAt); since < 0 || since > time.Minute {
		t.Fatalf("died at %v, server now %v", d.DiedAt, b.serverNow())
	}
	if s := b.stats(); s.Dead != 1 || s.DeadLettered != 1 || s.Pending != 0 {
		t.Fatalf("stats %+v", s)
	}

	errs, err := b.eng.Requeue(b.ctx, []string{"flaky", "next", "never"})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrNotFound) || !errors.Is(errs[2], ErrNotFound) {
		t.Fatalf("requeue: %v %v", errs, err)
	}
	ds := b.fetch("c", 1)
	if len(ds) != 1 || ds[0].ID != "flaky" || ds[0].Attempt != 1 || ds[0].LastError != "boom 2" {
		t.Fatalf("requeued delivery %+v", ds)
	}
	if errs, _ := b.eng.Requeue(b.ctx, []string{"flaky"}); !errors.Is(errs[0], ErrNotDead) {
		t.Fatalf("requeue of a leased task: %v", errs)
	}
	b.ack(ds...)
	if s := b.stats(); s.Dead != 0 || s.Pending != 0 || s.InFlight != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDeadLetterKeepsLastErrorOnEmptyReason(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "t", MaxAttempts: 2})
	ds := b.fetch("c", 1)
	if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: "first failure"}}); err != nil {
		t.Fatal(err)
	}
	ds = b.fetch("c", 1)
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt()}}); err != nil {
		t.Fatal(err)
	}
	page, _ := b.eng.DeadLetters(b.ctx, 0, 1)
	if page.Letters[0].LastError != "first failure" {
		t.Fatalf("last error %q", page.Letters[0].LastError)
	}
}

func TestKillAndPaging(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var msgs []Message
	for i := 0; i < 7; i++ {
		msgs = append(msgs, Message{ID: fmt.Sprintf("k%d", i)})
	}
	b.publish(msgs...)
	for i := 0; i < 7; i++ {
		ds := b.fetch("c", 1)
		errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "permanent"}})
		if err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
	}
	var seen []string
	for off := 0; ; off += 3 {
		page, err := b.eng.DeadLetters(b.ctx, off, 3)
		if err != nil || page.Total != 7 {
			t.Fatal(page, err)
		}
		if len(page.Letters) == 0 {
			break
		}
		for _, d := range page.Letters {
			seen = append(seen, d.ID)
		}
	}
	assertOrder(t, seen, []string{"k6", "k5", "k4", "k3", "k2", "k1", "k0"})

	n, err := b.eng.Purge(b.ctx, []string{"k0", "k1", "nope"})
	if err != nil || n != 2 {
		t.Fatalf("purge %d %v", n, err)
	}
	n, err = b.eng.PurgeAll(b.ctx)
	if err != nil || n != 5 {
		t.Fatalf("purge all %d %v", n, err)
	}
	b.assertNoTaskKeys()
}

func TestDeadLetterCaps(t *testing.T) {
	t.Parallel()
	t.Run("count", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{DeadLetterMaxCount: 3})
		for i := 0; i < 5; i++ {
			// Ids that sort backwards: letters dying in one millisecond must still trim oldest first.
			b.publish(Message{ID: fmt.Sprintf("d%d", 9-i)})
			ds := b.fetch("c", 1)
			if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt()}}); err != nil {
				t.Fatal(err)
			}
		}
		page, _ := b.eng.DeadLetters(b.ctx, 0, 10)
		var got []string
		for _, d := range page.Letters {
			got = append(got, d.ID)
		}
		assertOrder(t, got, []string{"d5", "d6", "d7"})
		if s := b.stats(); s.Trimmed != 2 || s.Dead != 3 {
			t.Fatalf("stats %+v", s)
		}
		for _, id := range []string{"d9", "d8"} {
			if _, err := b.eng.Task(b.ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("trimmed %s still has a record: %v", id, err)
			}
		}
	})
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{DeadLetterMaxAge: 50 * time.Millisecond})
		b.publish(Message{ID: "old"}, Message{ID: "new"})
		ds := b.fetch("c", 2)
		if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt()}}); err != nil {
			t.Fatal(err)
		}
		b.waitServerPast(b.serverNow().Add(60 * time.Millisecond))
		if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[1].Receipt()}}); err != nil {
			t.Fatal(err)
		}
		page, _ := b.eng.DeadLetters(b.ctx, 0, 10)
		if page.Total != 1 || page.Letters[0].ID != "new" {
			t.Fatalf("page %+v", page)
		}
	})
}

// assertNoTaskKeys checks that no per-task or per-partition key of the queue is left: only the
// fixed keys may remain. A test-only scan of the test's own queue.
func (b *bundle) assertNoTaskKeys() {
	b.t.Helper()
	keys, err := b.client.Keys(b.ctx, redistest.GlobEscape(b.eng.Keys().Base())+"*").Result()
	if err != nil {
		b.t.Fatal(err)
	}
	k := b.eng.Keys()
	fixed := map[string]bool{k.Stats(): true, k.Seq(): true, k.Wake(): true, k.Dedup(): true, k.Ctl(): true,
		k.Consumers(): true}
	for _, key := range keys {
		if !fixed[key] {
			b.t.Errorf("key left behind: %q", key)
		}
	}
}

// TestUnreadableRecordIsDeadLettered: a task whose record holds what srq did not write (here its
// headers and its enqueued-at, as another tool might leave them) is dead-lettered by the fetch
// that takes it, with the reason, instead of failing that fetch, whose other tasks would stay
// leased unseen until their leases expire and then use an attempt. The letter can be listed.
func TestUnreadableRecordIsDeadLettered(t *testing.T) {
	t.Parallel()
	for field, value := range map[string]string{"h": "\x05", "c": "yesterday"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.publish(Message{ID: "a", Partition: "p"}, Message{ID: "bad", Partition: "q"}, Message{ID: "c", Partition: "r"})
			if err := b.client.HSet(b.ctx, b.eng.Keys().Task("bad"), field, value).Err(); err != nil {
				t.Fatal(err)
			}
			ds := b.fetch("c", 3)
			if len(ds) != 2 || ds[0].ID == "bad" || ds[1].ID == "bad" {
				t.Fatalf("delivered %+v, want a and c", ds)
			}
			b.ack(ds...)
			page, err := b.eng.DeadLetters(b.ctx, 0, 10)
			if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != "bad" ||
				!strings.Contains(page.Letters[0].LastError, "unreadable task record") {
				t.Fatalf("dead letters %+v %v", page, err)
			}
			if s := b.stats(); s.Pending != 0 || s.InFlight != 0 || s.Dead != 1 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestFetchWaitPastUnreadable: a FetchWait whose fetch leased only unreadable tasks (dead-lettered
// on the spot) fetches again at once for the ready tasks behind them, instead of returning empty
// before its wait has passed.
func TestFetchWaitPastUnreadable(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "bad", Partition: "q"})
	b.publish(Message{ID: "good", Partition: "r"})
	if err := b.client.HSet(b.ctx, b.eng.Keys().Task("bad"), "h", "\x05").Err(); err != nil {
		t.Fatal(err)
	}
	ds, err := b.eng.FetchWait(b.ctx, "c", 1, time.Minute, 2*time.Second)
	if err != nil || len(ds) != 1 || ds[0].ID != "good" {
		t.Fatalf("FetchWait gave %+v, %v; want the ready task good", ds, err)
	}
}
