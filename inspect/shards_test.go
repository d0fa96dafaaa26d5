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

// TestTwoShards runs every view and action on a queue split in two and checks that the Inspector
// merges the shards: sums, top-k, deadline and death-time order, routing by partition.
func TestTwoShards(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	// Partitions p0…p9 spread over both shards; pN holds N+1 tasks.
	var onShard [2][]partition.Key
	for i := range 10 {
		p := partition.Key(fmt.Sprintf("p%d", i))
		onShard[engine.ShardOf(p, 2)] = append(onShard[engine.ShardOf(p, 2)], p)
		b.publish(msgs(string(p)+"-", p, i+1)...)
	}
	if len(onShard[0]) == 0 || len(onShard[1]) == 0 {
		t.Fatalf("partitions all on one shard: %v", onShard)
	}

	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || s.Shards != 2 || s.Pending != 55 || s.Published != 55 || s.PendingPartitions != 10 {
		t.Fatalf("stats %+v %v", s, err)
	}

	top, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByDepth, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(top, func(p Partition) string { return string(p.Key) }); got != "p9,p8,p7,p6" {
		t.Fatalf("top partitions %q", got)
	}
	for _, p := range top {
		if p.Shard != engine.ShardOf(p.Key, 2) || p.Pending != int64(p.Key[1]-'0'+1) {
			t.Fatalf("partition %+v", p)
		}
	}

	// Pausing a partition pauses it on its own shard only.
	if err := b.in.PausePartition(b.ctx, b.queue, "p9"); err != nil {
		t.Fatal(err)
	}
	p9, err := b.in.Partition(b.ctx, b.queue, "p9")
	if err != nil || !p9.Paused || p9.Shard != engine.ShardOf("p9", 2) {
		t.Fatalf("p9 %+v %v", p9, err)
	}

	// Lease one task of every other partition per shard, with leases growing in fetch order.
	var leased []string
	for i := range 6 {
		e := b.shards[i%2]
		ds, err := e.Fetch(b.ctx, fmt.Sprintf("w%d", i), 1, time.Duration(i+1)*time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if ds[0].Partition == "p9" {
			t.Fatal("a paused partition handed out work")
		}
		leased = append(leased, ds[0].ID)
	}
	var got []InFlightTask
	for off := 0; ; off += 4 {
		page, err := b.in.InFlight(b.ctx, b.queue, Page{Offset: off, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
	}
	if g := ids(got, func(t InFlightTask) string { return t.ID }); g != ids(leased, func(s string) string { return s }) {
		t.Fatalf("in flight %q, want the deadline order %q", g, leased)
	}
	task, err := b.in.Task(b.ctx, b.queue, leased[1])
	if err != nil || task.Shard != 1 || task.State != engine.StateLeased || task.Consumer != "w1" {
		t.Fatalf("task %+v %v", task, err)
	}

	// Dead letters alternate between the shards; the merged listing is newest first across both
	// (to the millisecond: within one shard in the exact order of death), whatever the page size
	// and window.
	var newest []string
	for i := range 6 {
		e := b.shards[i%2]
		ds, err := e.Fetch(b.ctx, "k", 1, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("fetch to kill: %v", err)
		}
		reason := "boom"
		if i%3 == 0 {
			reason = "special"
		}
		b.kill(ds[0], reason)
		newest = append([]string{ds[0].ID}, newest...)
	}
	ref := b.allDead(DeadQuery{Limit: 50})
	refIDs := ids(ref, func(d DeadLetter) string { return d.ID })
	for i, d := range ref {
		if i > 0 && d.DiedAt.After(ref[i-1].DiedAt) {
			t.Fatalf("listing %q is not newest first: %+v after %+v", refIDs, d, ref[i-1])
		}
		for _, e := range ref[:i] {
			if e.Shard == d.Shard && slices.Index(newest, e.ID) > slices.Index(newest, d.ID) {
				t.Fatalf("listing %q, deaths newest first %q: %s listed before %s of the same shard", refIDs, newest, e.ID, d.ID)
			}
		}
	}
	if len(ref) != len(newest) {
		t.Fatalf("listing %q, want the letters %q", refIDs, newest)
	}
	for _, q := range []DeadQuery{{Limit: 1}, {Limit: 2}, {Limit: 5}} {
		if g := ids(b.allDead(q), func(d DeadLetter) string { return d.ID }); g != refIDs {
			t.Fatalf("limit %d: %q, want %q", q.Limit, g, refIDs)
		}
	}
	special := b.allDead(DeadQuery{ErrorContains: "special", Limit: 1, Window: 1})
	var wantSpecial []string
	for _, d := range ref {
		if d.Error == "special" {
			wantSpecial = append(wantSpecial, d.ID)
		}
	}
	if g := ids(special, func(d DeadLetter) string { return d.ID }); len(wantSpecial) != 2 || g != ids(wantSpecial, func(s string) string { return s }) {
		t.Fatalf("special %q, want %q", g, wantSpecial)
	}
	_, err = b.in.DeadLetters(b.ctx, b.queue, DeadQuery{Cursor: "1:5"})
	mustErr(t, err, engine.ErrInvalid)

	n, err := b.in.RequeueDead(b.ctx, b.queue, DeadSelector{Filter: &DeadQuery{ErrorContains: "special"}})
	if err != nil || n != 2 {
		t.Fatalf("requeue special: %d %v", n, err)
	}
	n, err = b.in.PurgeDead(b.ctx, b.queue, DeadSelector{All: true})
	if err != nil || n != 4 {
		t.Fatalf("purge all: %d %v", n, err)
	}

	// Pausing the queue pauses both shards.
	if err := b.in.PauseQueue(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	for i, e := range b.shards {
		if ds, err := e.Fetch(b.ctx, "w", 10, time.Minute); err != nil || len(ds) != 0 {
			t.Fatalf("shard %d of a paused queue handed out %d tasks (%v)", i, len(ds), err)
		}
	}
	s, err = b.in.Stats(b.ctx, b.queue)
	if err != nil || !s.Paused || s.PausedShards != 2 || s.Dead != 0 || s.Pending != 55-12+2 {
		t.Fatalf("stats %+v %v", s, err)
	}
	if !slices.ContainsFunc(s.Consumers, func(c Consumer) bool { return c.ID == "w5" }) {
		t.Fatalf("consumers %+v", s.Consumers)
	}
}

// TestCorruptShardCount: a queue whose shard count in the registry is invalid (0, negative, above
// engine.MaxShards, not a number) is refused with engine.ErrInvalid by every call, at once: no
// panic (0 indexed an empty list of shards, -1 made one of negative size) and no endless loop (a
// count above the 16,384 cluster slots). Queues lists it with its error, beside the good queue.
func TestCorruptShardCount(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	bad := []struct{ queue, count string }{{"zero", "0"}, {"negative", "-1"}, {"huge", "20000"}, {"text", "x"}}
	for _, c := range bad {
		if err := b.client.HSet(b.ctx, engine.RegistryKey(b.prefix), c.queue, c.count).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range bad {
		q := c.queue
		calls := []struct {
			name string
			call func() error
		}{
			{"Stats", func() error { _, err := b.in.Stats(b.ctx, q); return err }},
			{"Partitions", func() error { _, err := b.in.Partitions(b.ctx, q, PartitionQuery{}); return err }},
			{"Partition", func() error { _, err := b.in.Partition(b.ctx, q, "p"); return err }},
			{"InFlight", func() error { _, err := b.in.InFlight(b.ctx, q, Page{}); return err }},
			{"Task", func() error { _, err := b.in.Task(b.ctx, q, "t"); return err }},
			{"DeadLetters", func() error { _, err := b.in.DeadLetters(b.ctx, q, DeadQuery{}); return err }},
			{"RequeueDead", func() error { _, err := b.in.RequeueDead(b.ctx, q, DeadSelector{All: true}); return err }},
			{"PurgeDead", func() error { _, err := b.in.PurgeDead(b.ctx, q, DeadSelector{All: true}); return err }},
			{"PausePartition", func() error { return b.in.PausePartition(b.ctx, q, "p") }},
			{"ResumePartition", func() error { return b.in.ResumePartition(b.ctx, q, "p") }},
			{"PauseQueue", func() error { return b.in.PauseQueue(b.ctx, q) }},
			{"ResumeQueue", func() error { return b.in.ResumeQueue(b.ctx, q) }},
		}
		for _, call := range calls {
			if err := call.call(); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "invalid shard count") {
				t.Fatalf("%s of a queue with %q shards: %v, want ErrInvalid saying the count is invalid", call.name, c.count, err)
			}
		}
	}
	qs, err := b.in.Queues(b.ctx)
	if err != nil {
		t.Fatalf("Queues with corrupt entries: %v", err)
	}
	if got := ids(qs, func(q engine.QueueInfo) string { return q.Name }); got != "huge,negative,q,text,zero" {
		t.Fatalf("queues %q", got)
	}
	for _, q := range qs {
		if ok := q.Name == b.queue; ok != (q.Err == nil) || ok != (q.Shards == 1) ||
			(q.Err != nil && !errors.Is(q.Err, engine.ErrInvalid)) {
			t.Fatalf("queue listed as %+v", q)
		}
	}
}

// TestConsumerCountOverShards: a consumer that serves several shards is counted once, as it is
// listed once: exactly while every shard lists all it has seen, and above consumersPerShard as the
// largest shard's count (exact when every consumer serves every shard).
func TestConsumerCountOverShards(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	seen := func(consumer string, shards ...int) {
		t.Helper()
		for _, i := range shards {
			if _, err := b.shards[i].Fetch(b.ctx, consumer, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen("everywhere", 0, 1, 2)
	seen("two", 1, 2)
	seen("one", 0)
	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || s.ConsumerCount != 3 || len(s.Consumers) != 3 {
		t.Fatalf("3 consumers over 3 shards: count %d, listed %+v, %v", s.ConsumerCount, s.Consumers, err)
	}
	for i := range consumersPerShard {
		seen(fmt.Sprintf("w%03d", i), 0, 1, 2)
	}
	// 103 consumers; "one" and "two" did not serve every shard, so the largest shard's count, 102,
	// is what the count can tell without listing them all. A sum would say 306.
	s, err = b.in.Stats(b.ctx, b.queue)
	if want := int64(consumersPerShard + 2); err != nil || s.ConsumerCount != want {
		t.Fatalf("103 consumers, 100 of them on every shard: count %d, want %d, %v", s.ConsumerCount, want, err)
	}
}
