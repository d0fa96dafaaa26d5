package inspect

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Config{}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("New(nil): %v, want ErrInvalid", err)
	}
	b := setup(t, 1)
	if _, err := New(b.client, Config{Prefix: "a{b"}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("New with a brace in the prefix: %v, want ErrInvalid", err)
	}
}

func TestQueuesAndUnknownQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	if err := engine.RegisterQueue(b.ctx, b.client, b.prefix, "other", 3); err != nil {
		t.Fatal(err)
	}
	qs, err := b.in.Queues(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []engine.QueueInfo{{Name: "other", Shards: 3}, {Name: "q", Shards: 1}}; !slices.Equal(qs, want) {
		t.Fatalf("queues %+v, want %+v", qs, want)
	}
	_, err = b.in.Stats(b.ctx, "nosuch")
	mustErr(t, err, engine.ErrNotFound)
	_, err = b.in.Stats(b.ctx, "bad{name")
	mustErr(t, err, engine.ErrInvalid)

	// An unregistered queue whose keys exist is one shard.
	e, err := engine.New(b.client, engine.Config{Queue: "plain", Prefix: b.prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publish(b.ctx, []engine.Message{msg("a", "p")}); err != nil {
		t.Fatal(err)
	}
	s, err := b.in.Stats(b.ctx, "plain")
	if err != nil || s.Shards != 1 || s.Pending != 1 {
		t.Fatalf("stats of an unregistered queue: %+v, %v", s, err)
	}
}

func TestStatsCountsAndConsumers(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.publish(msgs("a", "a", 3)...)
	b.publish(msgs("o", "!o", 2)...)
	b.publish(engine.Message{ID: "late", Partition: "late", Delay: time.Hour})
	ds, err := b.shards[0].Fetch(b.ctx, "worker-1", 2, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := b.shards[0].Fetch(b.ctx, "worker-2", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if errs, err := b.shards[0].Ack(b.ctx, []engine.Receipt{ds[0].Receipt()}); err != nil || errs[0] != nil {
		t.Fatalf("ack: %v %v", err, errs)
	}
	if err := b.in.PausePartition(b.ctx, b.queue, "idle"); err != nil {
		t.Fatal(err)
	}
	// A consumer whose last heartbeat is older than engine.ConsumerLive is listed, not live.
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	stale := redis.Z{Score: float64(now.Add(-engine.ConsumerLive - time.Second).UnixMilli()), Member: "gone"}
	if err := b.client.ZAdd(b.ctx, b.shards[0].Keys().Consumers(), stale).Err(); err != nil {
		t.Fatal(err)
	}

	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	// 6 published; 3 fetched (one acked): 3 pending (a: 1 or 2, late: 1, !o: 0 or 1).
	if s.Pending != 3 || s.InFlight != 2 || s.Dead != 0 || s.Published != 6 || s.Acked != 1 {
		t.Fatalf("stats %+v", s)
	}
	if s.PausedPartitions != 1 || s.Paused || s.ScheduledPartitions != 1 {
		t.Fatalf("paused %d, queue paused %v, scheduled %d", s.PausedPartitions, s.Paused, s.ScheduledPartitions)
	}
	if s.PendingPartitions != s.ReadyPartitions+s.ScheduledPartitions+s.BlockedPartitions {
		t.Fatalf("pending partitions %d != ready %d + scheduled %d + blocked %d", s.PendingPartitions,
			s.ReadyPartitions, s.ScheduledPartitions, s.BlockedPartitions)
	}
	if got := ids(s.Consumers, func(c Consumer) string { return c.ID }); got != "worker-2,worker-1,gone" && got != "worker-1,worker-2,gone" {
		t.Fatalf("consumers %q", got)
	}
	if !s.Consumers[0].Live || !s.Consumers[1].Live || s.Consumers[2].Live || s.LiveConsumers != 2 {
		t.Fatalf("consumers %+v, %d live; want the two that fetched live, and the stale one not", s.Consumers, s.LiveConsumers)
	}
	if s.ConsumerCount != 3 || s.Consumers[0].LastSeen.Before(s.Consumers[1].LastSeen) {
		t.Fatalf("consumers %+v (count %d), want newest first", s.Consumers, s.ConsumerCount)
	}
	if d := s.ServerTime.Sub(s.Consumers[0].LastSeen); d < 0 || d > time.Minute {
		t.Fatalf("last seen %v, server time %v", s.Consumers[0].LastSeen, s.ServerTime)
	}
}

func TestPartitionsByDepthAgeAndPaused(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	now := time.Now()
	// Heads: old (an hour ago), mid (a minute ago), new (now), future (in an hour).
	b.publish(engine.Message{ID: "m1", Partition: "mid", At: now.Add(-time.Minute)})
	b.publish(engine.Message{ID: "o1", Partition: "old", At: now.Add(-time.Hour)})
	b.publish(msgs("n", "new", 4)...)
	b.publish(engine.Message{ID: "f1", Partition: "future", Delay: time.Hour},
		engine.Message{ID: "f2", Partition: "future", Delay: 2 * time.Hour})
	b.publish(msgs("x", "!ord", 3)...)

	byDepth, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByDepth, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byDepth, func(p Partition) string { return string(p.Key) }); got != "new,!ord,future" {
		t.Fatalf("by depth %q", got)
	}
	if byDepth[0].Pending != 4 || byDepth[0].State != PartitionReady || byDepth[2].State != PartitionScheduled ||
		byDepth[2].NextDue.Before(now.Add(59*time.Minute)) {
		t.Fatalf("by depth %+v", byDepth)
	}

	byAge, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByAge})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byAge, func(p Partition) string { return string(p.Key) }); got != "old,mid,new,!ord,future" &&
		got != "old,mid,!ord,new,future" {
		t.Fatalf("by age %q", got)
	}
	if !byAge[0].HeadAvailableAt.Equal(now.Add(-time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("old's head %v, want %v", byAge[0].HeadAvailableAt, now.Add(-time.Hour))
	}

	// Fetching moves the heads: the ordered partition becomes held with its next task as head.
	ds := b.fetchAll("w", time.Minute)
	if len(ds) != 7 { // old, mid, 4 new, first of !ord
		t.Fatalf("fetched %d", len(ds))
	}
	p, err := b.in.Partition(b.ctx, b.queue, "!ord")
	if err != nil {
		t.Fatal(err)
	}
	if p.Pending != 2 || p.State != PartitionHeld || p.Leased != 1 || p.HeadAvailableAt.IsZero() {
		t.Fatalf("held ordered partition %+v", p)
	}
	byAge, err = b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByAge})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(byAge, func(p Partition) string { return string(p.Key) }); got != "!ord,future" {
		t.Fatalf("by age after fetching %q", got)
	}

	// Pausing lists the partition as paused, longest paused first.
	for _, p := range []partition.Key{"future", "old"} {
		if err := b.in.PausePartition(b.ctx, b.queue, p); err != nil {
			t.Fatal(err)
		}
	}
	paused, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByPaused})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(paused, func(p Partition) string { return string(p.Key) }); got != "future,old" ||
		paused[0].State != PartitionPaused || paused[0].PausedAt.IsZero() || !paused[0].Paused {
		t.Fatalf("paused %+v", paused)
	}
	if err := b.in.ResumePartition(b.ctx, b.queue, "future"); err != nil {
		t.Fatal(err)
	}
	paused, err = b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByPaused})
	if err != nil || ids(paused, func(p Partition) string { return string(p.Key) }) != "old" {
		t.Fatalf("paused after resume %+v %v", paused, err)
	}

	_, err = b.in.Partitions(b.ctx, b.queue, PartitionQuery{Limit: MaxLimit + 1})
	mustErr(t, err, engine.ErrInvalid)
	_, err = b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: PartitionOrder(9)})
	mustErr(t, err, engine.ErrInvalid)
}

func TestPausedPartitionHandsOutNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.publish(msg("a", "p"))
	if err := b.in.PausePartition(b.ctx, b.queue, "p"); err != nil {
		t.Fatal(err)
	}
	if ds := b.fetchAll("w", time.Minute); len(ds) != 0 {
		t.Fatalf("a paused partition handed out %d tasks", len(ds))
	}
	if err := b.in.ResumePartition(b.ctx, b.queue, "p"); err != nil {
		t.Fatal(err)
	}
	if ds := b.fetchAll("w", time.Minute); len(ds) != 1 {
		t.Fatalf("a resumed partition handed out %d tasks", len(ds))
	}
	mustErr(t, b.in.PausePartition(b.ctx, b.queue, partition.Key("\xff")), engine.ErrInvalid)
}

func TestPauseQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.publish(msgs("a", "a", 2)...)
	if err := b.in.PauseQueue(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil || !s.Paused || s.PausedShards != 1 {
		t.Fatalf("stats of a paused queue %+v %v", s, err)
	}
	if ds := b.fetchAll("w", time.Minute); len(ds) != 0 {
		t.Fatalf("a paused queue handed out %d tasks", len(ds))
	}
	// A blocked fetcher is woken by the resume.
	woke := make(chan []engine.Delivery, 1)
	go func() {
		ds, _ := b.shards[0].FetchWait(b.ctx, "sleeper", 1, time.Minute, 30*time.Second)
		woke <- ds
	}()
	if err := b.in.ResumeQueue(b.ctx, b.queue); err != nil {
		t.Fatal(err)
	}
	select {
	case ds := <-woke:
		if len(ds) != 1 {
			t.Fatalf("after resume the sleeper got %d tasks", len(ds))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sleeper got nothing within 20s of the resume")
	}
	s, err = b.in.Stats(b.ctx, b.queue)
	if err != nil || s.Paused || s.InFlight != 1 {
		t.Fatalf("stats after resume %+v %v", s, err)
	}
}

func TestInFlightPaging(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.publish(msgs("t", "p", 5)...)
	e := b.shards[0]
	// Leases of 1..5 minutes, so the deadline order is the fetch order.
	var want []string
	for i := range 5 {
		ds, err := e.Fetch(b.ctx, "c"+string(rune('a'+i)), 1, time.Duration(i+1)*time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("fetch: %v", err)
		}
		want = append(want, ds[0].ID)
	}
	page, err := b.in.InFlight(b.ctx, b.queue, Page{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(page, func(t InFlightTask) string { return t.ID }); got != strings.Join(want[:2], ",") {
		t.Fatalf("first page %q, want %q", got, want[:2])
	}
	if page[0].Consumer != "ca" || page[0].Attempt != 1 || page[0].Partition != "p" ||
		!page[0].LeaseDeadline.Before(page[1].LeaseDeadline) || page[0].EnqueuedAt.IsZero() {
		t.Fatalf("first page %+v", page)
	}
	page, err = b.in.InFlight(b.ctx, b.queue, Page{Offset: 4, Limit: 2})
	if err != nil || ids(page, func(t InFlightTask) string { return t.ID }) != want[4] {
		t.Fatalf("last page %+v %v", page, err)
	}
	page, err = b.in.InFlight(b.ctx, b.queue, Page{Offset: 5})
	if err != nil || page == nil || len(page) != 0 {
		t.Fatalf("page past the end %+v %v", page, err)
	}
	_, err = b.in.InFlight(b.ctx, b.queue, Page{Offset: -1})
	mustErr(t, err, engine.ErrInvalid)
	_, err = b.in.InFlight(b.ctx, b.queue, Page{Offset: MaxOffset})
	mustErr(t, err, engine.ErrInvalid)
	// Offset+Limit wraps around to a negative number; the page is refused before any queue is
	// looked up.
	for _, q := range []string{b.queue, "nosuch"} {
		_, err = b.in.InFlight(b.ctx, q, Page{Offset: math.MaxInt, Limit: 1})
		mustErr(t, err, engine.ErrInvalid)
		_, err = b.in.InFlight(b.ctx, q, Page{Offset: math.MaxInt})
		mustErr(t, err, engine.ErrInvalid)
	}
}

func TestTaskLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.publish(msg("a", "p"))
	got, err := b.in.Task(b.ctx, b.queue, "a")
	if err != nil || got.ID != "a" || got.State != engine.StatePending || string(got.Payload) != "payload-a" {
		t.Fatalf("task %+v %v", got, err)
	}
	_, err = b.in.Task(b.ctx, b.queue, "nope")
	mustErr(t, err, engine.ErrNotFound)
}
