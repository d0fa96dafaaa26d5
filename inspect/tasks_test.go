package inspect

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// allPending walks PendingTasks from the first page with pages of limit and returns the ids.
func (b *bundle) allPending(delayed bool, limit int) []string {
	b.t.Helper()
	var out []string
	var parts int64
	q := TaskQuery{Delayed: delayed, Limit: limit}
	for range 1000 {
		pg, err := b.in.PendingTasks(b.ctx, b.queue, q)
		if err != nil {
			b.t.Fatal(err)
		}
		if len(pg.Tasks) > limit {
			b.t.Fatalf("a page of %d, limit %d", len(pg.Tasks), limit)
		}
		for _, t := range pg.Tasks {
			out = append(out, t.ID)
		}
		if q.Cursor == "" {
			parts = pg.Partitions
		} else if pg.Partitions != parts {
			b.t.Fatalf("a page counts %d partitions, the first %d", pg.Partitions, parts)
		}
		if pg.Next == "" {
			return out
		}
		q.Cursor = pg.Next
	}
	b.t.Fatal("the walk does not end")
	return nil
}

// TestPendingTasksOverShards: on a sharded queue the lists merge the shards partition by
// partition, by the available-at of each partition's earliest task, and pages of any size walk the
// same tasks in the same order; the delayed list holds the partitions whose every task is delayed.
func TestPendingTasksOverShards(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var wantDue, wantDelayed []string
	for i := range 8 {
		p := partition.Key(fmt.Sprint("p", i))
		// Partition i's tasks became available i minutes before now, so p7 waits longest.
		at := now.Add(-time.Duration(i) * time.Minute)
		b.publish(engine.Message{ID: fmt.Sprint(p, "-a"), Partition: p, At: at}, engine.Message{ID: fmt.Sprint(p, "-b"), Partition: p, At: at})
		wantDue = append([]string{fmt.Sprint(p, "-a"), fmt.Sprint(p, "-b")}, wantDue...)
		d := partition.Key(fmt.Sprint("d", i))
		b.publish(engine.Message{ID: fmt.Sprint(d, "-a"), Partition: d, Delay: time.Duration(i+1) * time.Hour})
		wantDelayed = append(wantDelayed, fmt.Sprint(d, "-a"))
	}
	for _, limit := range []int{1, 3, 16, 50} {
		if got := b.allPending(false, limit); !slices.Equal(got, wantDue) {
			t.Errorf("due, pages of %d: %v, want %v", limit, got, wantDue)
		}
		if got := b.allPending(true, limit); !slices.Equal(got, wantDelayed) {
			t.Errorf("delayed, pages of %d: %v, want %v", limit, got, wantDelayed)
		}
	}
	pg, err := b.in.PendingTasks(b.ctx, b.queue, TaskQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Partitions != 8 || len(pg.Tasks) != 2 || pg.Tasks[0].Partition != "p7" || pg.Tasks[0].Shard != engine.ShardOf("p7", 3) ||
		pg.Tasks[0].EnqueuedAt.IsZero() || pg.ServerTime.IsZero() {
		t.Errorf("first page %+v", pg)
	}
	for _, c := range []string{"zz", "2:,", "3:,,q", "3:1.-1,,", "3:1,,"} {
		if _, err := b.in.PendingTasks(b.ctx, b.queue, TaskQuery{Cursor: c}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("cursor %q: %v, want ErrInvalid", c, err)
		}
	}
	if _, err := b.in.PendingTasks(b.ctx, b.queue, TaskQuery{Limit: MaxLimit + 1}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("limit too large: %v", err)
	}

	// Run now: a delayed task moves to the due list, where its partition is the newest.
	shard, err := b.in.RunNow(b.ctx, b.queue, "d7-a")
	if err != nil || shard != engine.ShardOf("d7", 3) {
		t.Fatalf("run now: shard %d, %v", shard, err)
	}
	if got := b.allPending(false, 5); len(got) != 17 || got[16] != "d7-a" {
		t.Errorf("due after run now: %v", got)
	}
	if _, err := b.in.RunNow(b.ctx, b.queue, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("run now of an unknown task: %v", err)
	}
	ds, err := b.eng("p0").Fetch(b.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatal(err)
	}
	if _, err := b.in.RunNow(b.ctx, b.queue, ds[0].ID); !errors.Is(err, engine.ErrNotPending) {
		t.Errorf("run now of a leased task: %v", err)
	}
}

// TestOutcomesOverShards: the kept outcomes of every shard, latest retention end first, paged by
// a cursor.
func TestOutcomesOverShards(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	var want []string
	for i := range 7 {
		p := partition.Key(fmt.Sprint("p", i))
		id := b.publish(engine.Message{ID: fmt.Sprint("o", i), Partition: p, KeepOutcome: time.Duration(i+1) * time.Hour})[0]
		want = append([]string{id}, want...)
	}
	b.publish(engine.Message{ID: "unkept", Partition: "p0"})
	for _, d := range b.fetchAll("w", time.Minute) {
		if _, err := b.eng(d.Partition).Ack(b.ctx, []engine.Receipt{d.Receipt()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{1, 2, 7, 50} {
		var got []string
		cursor := ""
		for range 100 {
			pg, err := b.in.Outcomes(b.ctx, b.queue, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if pg.Total != 7 {
				t.Fatalf("total %d, limit %d, cursor %q", pg.Total, limit, cursor)
			}
			for _, o := range pg.Outcomes {
				if o.State != "succeeded" || o.Ended.IsZero() || o.Shard != engine.ShardOf(partition.Key("p"+o.ID[1:]), 3) {
					t.Errorf("outcome %+v", o)
				}
				got = append(got, o.ID)
			}
			if cursor = pg.Next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d: %v, want %v", limit, got, want)
		}
	}
	if _, err := b.in.Outcomes(b.ctx, b.queue, "3:~,,", 1); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("malformed cursor: %v", err)
	}
}
