package inspect

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// withEvents makes b's shard engines keep an event stream of n entries and announce it, as a
// queue with QueueConfig.Events does.
func (b *bundle) withEvents(n int) {
	b.t.Helper()
	for i, e := range b.shards {
		cfg := e.Config()
		cfg.Events = n
		eng, err := engine.New(b.client, cfg)
		if err != nil {
			b.t.Fatal(err)
		}
		if err := eng.AnnounceEvents(b.ctx); err != nil {
			b.t.Fatal(err)
		}
		b.shards[i] = eng
	}
}

func (b *bundle) events(q EventQuery) EventPage {
	b.t.Helper()
	page, err := b.in.Events(b.ctx, b.queue, q)
	if err != nil {
		b.t.Fatalf("events %+v: %v", q, err)
	}
	return page
}

func kinds(evs []Event) string {
	return ids(evs, func(e Event) string { return e.Kind + ":" + e.ID })
}

// TestEvents reads a two-shard queue's events: pages from the oldest merged by time, the newest
// ones, from now on, a wait in Redis that a publish ends, and bad cursors.
func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	if page := b.events(EventQuery{}); page.Stream || len(page.Events) != 0 {
		t.Fatalf("a queue without a stream: %+v", page)
	}
	b.withEvents(1000)
	var all []string
	for i := range 6 {
		p := partition.Key(fmt.Sprintf("p%d", i))
		all = append(all, b.publish(msg(fmt.Sprintf("t%d", i), p))...)
	}
	if s0, s1 := engine.ShardOf("p0", 2), engine.ShardOf("p1", 2); s0 == s1 && engine.ShardOf("p2", 2) == s0 {
		t.Fatal("the partitions all live on one shard")
	}
	var got []Event
	page := EventPage{}
	for range 10 {
		page = b.events(EventQuery{After: page.Next, Limit: 4})
		if !page.Stream || len(page.Events) > 4 {
			t.Fatalf("page %+v", page)
		}
		got = append(got, page.Events...)
		if len(page.Events) < 4 {
			break
		}
	}
	if len(got) != 6 || !strings.Contains(page.Next, ",") {
		t.Fatalf("read %d events (%s), next %q", len(got), kinds(got), page.Next)
	}
	for i, ev := range got {
		if ev.Kind != "published" || ev.Shard != engine.ShardOf(partition.Key(ev.Partition), 2) || ev.Time.IsZero() {
			t.Fatalf("event %+v", ev)
		}
		if i > 0 && ev.Time.Before(got[i-1].Time) {
			t.Fatalf("events out of time order: %+v after %+v", ev, got[i-1])
		}
	}
	if ids(got, func(e Event) string { return e.ID }) == "" || !sameSet(ids(got, func(e Event) string { return e.ID }), all) {
		t.Fatalf("events of %s, published %v", kinds(got), all)
	}

	last := b.events(EventQuery{Last: true, Limit: 2})
	if len(last.Events) != 2 || last.Events[1] != got[5] || last.Events[0] != got[4] {
		t.Fatalf("last two %s, want those of %s", kinds(last.Events), kinds(got[4:]))
	}
	if more := b.events(EventQuery{After: last.Next}); len(more.Events) != 0 {
		t.Fatalf("after the newest: %s", kinds(more.Events))
	}

	// From now on: nothing, then a wait that the next publish ends.
	now := b.events(EventQuery{After: EventsFromNow})
	if len(now.Events) != 0 || now.Next != page.Next {
		t.Fatalf("from now: %+v, want no events and next %q", now, page.Next)
	}
	done := make(chan EventPage, 1)
	go func() {
		p, err := b.in.Events(b.ctx, b.queue, EventQuery{After: now.Next, Wait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	b.publish(msg("late", "p0"))
	waited := <-done
	if kinds(waited.Events) != "published:late" {
		t.Fatalf("the wait returned %s", kinds(waited.Events))
	}

	for _, bad := range []string{"x", "1-2", "1-2,x", "1-2,3-4,5-6", "-1,0"} {
		if _, err := b.in.Events(b.ctx, b.queue, EventQuery{After: bad}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("cursor %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := b.in.Events(b.ctx, b.queue, EventQuery{Limit: MaxLimit + 1}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("limit above MaxLimit: %v", err)
	}
}

func sameSet(joined string, want []string) bool {
	got := strings.Split(joined, ",")
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	return slices.Equal(got, w)
}

// TestCancel cancels a pending, a leased, a dead and an unknown task of a two-shard queue; the
// operator's cancel and requeue write the queue's events though the Inspector was not told of the
// stream.
func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.withEvents(1000)
	b.publish(msg("pending", "a"), msg("leased", "!b"), msg("dead", "c"))
	for _, d := range b.fetchAll("w", time.Minute) {
		switch d.ID {
		case "dead":
			b.kill(d, "broke")
		case "pending":
			if _, err := b.eng(d.Partition).Reject(b.ctx, []engine.Rejection{{Receipt: d.Receipt(), NotAttempt: true}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := b.in.Cancel(b.ctx, b.queue, "pending", "")
	if err != nil || res.Running || res.Shard != engine.ShardOf("a", 2) {
		t.Fatalf("cancel pending: %+v, %v", res, err)
	}
	if _, err := b.in.Task(b.ctx, b.queue, "pending"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the cancelled task is still there: %v", err)
	}
	res, err = b.in.Cancel(b.ctx, b.queue, "leased", "stop it")
	if err != nil || !res.Running || res.Shard != engine.ShardOf("!b", 2) {
		t.Fatalf("cancel leased: %+v, %v", res, err)
	}
	if _, err := b.in.Cancel(b.ctx, b.queue, "dead", ""); !errors.Is(err, engine.ErrFinished) {
		t.Fatalf("cancel a dead letter: %v", err)
	}
	if _, err := b.in.Cancel(b.ctx, b.queue, "nope", ""); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cancel an unknown task: %v", err)
	}
	if n, err := b.in.RequeueDead(b.ctx, b.queue, DeadSelector{IDs: []string{"dead"}}); err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	evs := b.events(EventQuery{Limit: MaxLimit}).Events
	var cancelled, requeued []string
	for _, ev := range evs {
		switch ev.Kind {
		case "cancelled":
			cancelled = append(cancelled, ev.ID+":"+ev.Error)
		case "requeued":
			requeued = append(requeued, ev.ID)
		}
	}
	if !slices.Equal(cancelled, []string{"pending:" + DefaultCancelReason}) || !slices.Equal(requeued, []string{"dead"}) {
		t.Fatalf("cancelled %v, requeued %v in %s", cancelled, requeued, kinds(evs))
	}
	st, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || st.Cancelled != 1 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
}

// TestHeldPartitions holds two ordered partitions of a two-shard queue with dead letters: they are
// listed by ByHeld with the letter and its error, counted in the stats, shown held in the other
// orders too, and a resume releases one.
func TestHeldPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	parts := []partition.Key{"!acct-1", "!acct-2", "!acct-3"}
	for _, p := range parts {
		m := msg("first-"+string(p), p)
		m.HoldOnDead = true
		b.publish(m, msg("next-"+string(p), p))
	}
	// The first two partitions' first tasks die in order; the third's is only leased.
	for _, p := range parts[:2] {
		ds, err := b.eng(p).Fetch(b.ctx, "w", 1, time.Minute)
		for err == nil && len(ds) == 1 && ds[0].Partition != p {
			if _, err = b.eng(p).Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), NotAttempt: true}}); err == nil {
				ds, err = b.eng(p).Fetch(b.ctx, "w", 1, time.Minute)
			}
		}
		if err != nil || len(ds) != 1 || ds[0].Partition != p {
			t.Fatalf("fetch %s: %v %+v", p, err, ds)
		}
		b.kill(ds[0], "ledger rejects "+string(p))
	}
	held, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByHeld})
	if err != nil || len(held) != 2 {
		t.Fatalf("held: %+v, %v", held, err)
	}
	// Both may have been held in one millisecond: their order is then the shards'.
	slices.SortFunc(held, func(a, b Partition) int { return strings.Compare(string(a.Key), string(b.Key)) })
	for i, p := range held {
		key := parts[i]
		if p.Key != key || p.HeldBy != "first-"+string(key) || p.HeldError != "ledger rejects "+string(key) ||
			p.State != PartitionHeldByDeadLetter || p.Pending != 1 || p.Shard != engine.ShardOf(key, 2) {
			t.Fatalf("held partition %d: %+v", i, p)
		}
	}
	if by, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByDepth}); err != nil ||
		!slices.ContainsFunc(by, func(p Partition) bool { return p.Key == parts[0] && p.HeldBy != "" }) {
		t.Fatalf("by depth: %+v, %v", by, err)
	}
	if st, err := b.in.Stats(b.ctx, b.queue); err != nil || st.HeldPartitions != 2 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	if err := b.in.ResumePartition(b.ctx, b.queue, parts[0]); err != nil {
		t.Fatal(err)
	}
	held, err = b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByHeld, Limit: 1})
	if err != nil || len(held) != 1 || held[0].Key != parts[1] {
		t.Fatalf("held after a resume: %+v, %v", held, err)
	}
	if p, err := b.in.Partition(b.ctx, b.queue, parts[0]); err != nil || p.HeldBy != "" || p.State != PartitionReady {
		t.Fatalf("the resumed partition: %+v, %v", p, err)
	}
}
