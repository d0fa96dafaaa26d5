package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// walk lists every page of PendingTasks from the first with limit and returns the ids, page by page.
func (b *bundle) walk(delayed bool, limit int) [][]string {
	b.t.Helper()
	var pages [][]string
	cur := PendingCursor{First: true}
	for range 100 {
		pg, err := b.eng.PendingTasks(b.ctx, delayed, cur, limit)
		if err != nil {
			b.t.Fatalf("pending tasks from %+v: %v", cur, err)
		}
		var ids []string
		for _, t := range pg.Tasks {
			ids = append(ids, t.ID)
		}
		if len(ids) > 0 {
			pages = append(pages, ids)
		}
		if pg.Done {
			return pages
		}
		cur = pg.Next
	}
	b.t.Fatal("the walk does not end")
	return nil
}

// TestPendingTasks: the queue-wide lists of pending tasks go partition by partition, longest
// waiting first (due) or soonest first (all delayed), each partition's tasks by priority, then
// available-at, then publish order; every pending task is in one list once, and pages of any size
// list the same tasks in the same order, each with its attempts and last error.
func TestPendingTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	now := b.serverNow()
	b.publish(
		Message{ID: "b1", Partition: "!b", At: now.Add(-time.Minute)},
		Message{ID: "b2", Partition: "!b", At: now.Add(-time.Minute)},
		Message{ID: "a1", Partition: "a"},
		Message{ID: "a2", Partition: "a", Priority: 5},
		Message{ID: "a3", Partition: "a", Delay: time.Hour},
		Message{ID: "d1", Partition: "d", Delay: 2 * time.Hour},
		Message{ID: "c1", Partition: "c", Delay: 30 * time.Minute},
		Message{ID: "c2", Partition: "c", Delay: 40 * time.Minute, Priority: 2},
	)
	// A task sent back after a failure: listed with its attempt and error.
	ds := b.fetch("w", 1)
	if ds[0].ID != "b1" {
		t.Fatalf("fetched %s, want b1", ds[0].ID)
	}
	if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Reason: "flaky"}}); err != nil {
		t.Fatal(err)
	}
	wantDue := []string{"b1", "b2", "a2", "a1", "a3"}
	wantDelayed := []string{"c2", "c1", "d1"}
	for _, limit := range []int{1, 2, 3, 10} {
		if got := slices.Concat(b.walk(false, limit)...); !slices.Equal(got, wantDue) {
			t.Errorf("pending, pages of %d: %v, want %v", limit, got, wantDue)
		}
		if got := slices.Concat(b.walk(true, limit)...); !slices.Equal(got, wantDelayed) {
			t.Errorf("delayed, pages of %d: %v, want %v", limit, got, wantDelayed)
		}
	}
	if pages := b.walk(false, 2); len(pages) != 3 || len(pages[0]) != 2 || len(pages[2]) != 1 {
		t.Errorf("pages of 2: %v", pages)
	}
	pg, err := b.eng.PendingTasks(b.ctx, false, PendingCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Partitions != 2 || !pg.Done || len(pg.Tasks) != 5 {
		t.Fatalf("page %+v", pg)
	}
	b1 := pg.Tasks[0]
	if b1.Partition != "!b" || b1.Attempts != 1 || b1.LastError != "flaky" || b1.EnqueuedAt.IsZero() ||
		!b1.PartitionHead.Equal(now.Add(-time.Minute).Truncate(time.Millisecond)) {
		t.Errorf("b1 listed as %+v", b1)
	}
	if a2 := pg.Tasks[2]; a2.Priority != 5 || a2.Partition != "a" {
		t.Errorf("a2 listed as %+v", a2)
	}
	if a3 := pg.Tasks[4]; !a3.AvailableAt.After(pg.Now) {
		t.Errorf("a3 (delayed) listed available at %v, now %v", a3.AvailableAt, pg.Now)
	}
	if pg, err := b.eng.PendingTasks(b.ctx, true, PendingCursor{First: true}, 10); err != nil || pg.Partitions != 2 {
		t.Errorf("delayed partitions %d, %v; want 2", pg.Partitions, err)
	}
	// A cursor past the end lists nothing, and is done.
	if pg, err := b.eng.PendingTasks(b.ctx, false, PendingCursor{Rank: 99}, 10); err != nil || !pg.Done || len(pg.Tasks) != 0 {
		t.Errorf("past the end: %+v %v", pg, err)
	}
	for _, bad := range []struct {
		c     PendingCursor
		limit int
	}{{PendingCursor{}, 0}, {PendingCursor{}, MaxInspectPage + 1}, {PendingCursor{Rank: -1}, 1}, {PendingCursor{Skip: -1}, 1}} {
		if _, err := b.eng.PendingTasks(b.ctx, false, bad.c, bad.limit); !errors.Is(err, ErrInvalid) {
			t.Errorf("PendingTasks(%+v, %d): %v, want ErrInvalid", bad.c, bad.limit, err)
		}
	}
	// Taken by a fetch, a task leaves the list; the rest stay in order.
	b.drain("w")
	if got := slices.Concat(b.walk(false, 2)...); len(got) != 0 {
		t.Errorf("after a drain: %v", got)
	}
}

// TestRunNow: a delayed task made available now is fetched at once (its partition ready), after
// the tasks of its priority available before it; in an ordered partition blocked by a delayed
// reject the block is lifted; a leased task, a dead letter and an unknown id are refused.
func TestRunNow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(
		Message{ID: "later", Partition: "u", Delay: time.Hour},
		Message{ID: "alone", Partition: "s", Delay: time.Hour},
		Message{ID: "o1", Partition: "!o"},
		Message{ID: "o2", Partition: "!o", Delay: time.Hour},
		Message{ID: "o3", Partition: "!o"},
		Message{ID: "u0", Partition: "u"},
	)
	// Made available in a later millisecond than u0 and o3, the tasks run now come after them.
	b.waitServerPast(b.serverNow().Truncate(time.Millisecond).Add(time.Millisecond))
	errs, err := b.eng.RunNow(b.ctx, []string{"later", "alone", "o2", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrNotFound) {
		t.Fatalf("run now: %v", errs)
	}
	info, err := b.eng.Task(b.ctx, "alone")
	if err != nil || info.AvailableAt.After(b.serverNow()) {
		t.Fatalf("alone available at %v (%v)", info.AvailableAt, err)
	}
	ps, _, err := b.eng.Partitions(b.ctx, "s", "u")
	if err != nil || !ps[0].Ready || ps[0].HeadAvailableAt.After(b.serverNow()) {
		t.Fatalf("partition s after run now: %+v %v", ps, err)
	}
	got := map[partition.Key][]string{}
	for _, id := range b.drain("w") {
		info := id
		switch id[0] {
		case 'o':
			got["!o"] = append(got["!o"], info)
		case 'u', 'l':
			got["u"] = append(got["u"], info)
		default:
			got["s"] = append(got["s"], info)
		}
	}
	if !slices.Equal(got["!o"], []string{"o1", "o3", "o2"}) || !slices.Equal(got["u"], []string{"u0", "later"}) ||
		!slices.Equal(got["s"], []string{"alone"}) {
		t.Fatalf("fetched in order %v", got)
	}

	// An ordered partition blocked by a delayed reject goes on from its head.
	b.publish(Message{ID: "h1", Partition: "!h"}, Message{ID: "h2", Partition: "!h"})
	ds := b.fetch("w", 1)
	if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Delay: time.Hour, Reason: "later"}}); err != nil {
		t.Fatal(err)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Fatalf("a blocked partition handed out %s", ds[0].ID)
	}
	if errs, err := b.eng.RunNow(b.ctx, []string{"h1"}); err != nil || errs[0] != nil {
		t.Fatalf("run now h1: %v %v", err, errs)
	}
	if got := b.drain("w"); !slices.Equal(got, []string{"h1", "h2"}) {
		t.Fatalf("after run now: %v", got)
	}

	// A paused partition stays paused: its task, made available, is not handed out.
	b.publish(Message{ID: "p1", Partition: "paused", Delay: time.Hour})
	if err := b.eng.Pause(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if errs, err := b.eng.RunNow(b.ctx, []string{"p1"}); err != nil || errs[0] != nil {
		t.Fatalf("run now p1: %v %v", err, errs)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Fatalf("a paused partition handed out %s", ds[0].ID)
	}
	if err := b.eng.Resume(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if got := b.drain("w"); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("after resume: %v", got)
	}

	// Leased and dead tasks are not pending.
	b.publish(Message{ID: "x1", Partition: "x"}, Message{ID: "x2", Partition: "x"})
	ds = b.fetch("w", 2)
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "dead"}}); err != nil {
		t.Fatal(err)
	}
	errs, err = b.eng.RunNow(b.ctx, []string{ds[0].ID, ds[1].ID})
	if err != nil || !errors.Is(errs[0], ErrNotPending) || !errors.Is(errs[1], ErrNotPending) {
		t.Fatalf("run now of a dead and a leased task: %v %v", errs, err)
	}
	if _, err := b.eng.RunNow(b.ctx, []string{""}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty id: %v", err)
	}
}

// TestOutcomes: the kept outcomes are listed latest retention end first, paged by a cursor that
// goes on also when its task's outcome was forgotten, with their state, end, result size and error.
// A task run now goes after the tasks of its priority available already, also those that became
// available in the same millisecond (its old sequence number would sort it before them): each of
// 30 rounds publishes a delayed task, then one available now, and runs the first now at once.
func TestRunNowAfterTasksOfTheSameMillisecond(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 30 {
		p := partition.Key(fmt.Sprint("p", i))
		b.publish(Message{ID: fmt.Sprint("d", i), Partition: p, Delay: time.Hour})
		b.publish(Message{ID: fmt.Sprint("a", i), Partition: p})
		if errs, err := b.eng.RunNow(b.ctx, []string{fmt.Sprint("d", i)}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
	}
	got := b.drain("w")
	for i := range 30 {
		a, d := slices.Index(got, fmt.Sprint("a", i)), slices.Index(got, fmt.Sprint("d", i))
		if a < 0 || d < 0 || d < a {
			t.Errorf("hand-out order %v: d%d before a%d, want each partition's available task before the one run now", got, i, i)
		}
	}
}

// RunNow of a task that ended with its outcome kept is ErrNotPending, as for a dead letter; of one
// acked without an outcome kept, ErrNotFound (operations.md: 409 and 404).
func TestRunNowOfAnEndedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "kept", KeepOutcome: time.Hour}, Message{ID: "gone"})
	b.ack(b.fetch("w", 2)...)
	errs, err := b.eng.RunNow(b.ctx, []string{"kept", "gone"})
	if err != nil || !errors.Is(errs[0], ErrNotPending) || !errors.Is(errs[1], ErrNotFound) {
		t.Fatalf("run now of an ended task with its outcome kept and of one without: %v %v", errs, err)
	}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var ids []string
	for i := range 5 {
		ids = append(ids, b.publish(Message{Partition: "p", KeepOutcome: time.Duration(i+1) * time.Hour})[0])
	}
	b.publish(Message{Partition: "p"}) // nothing kept
	ds := b.fetch("w", 6)
	var rs []Receipt
	for i := range ds {
		r := ds[i].Receipt()
		if ds[i].ID == ids[1] {
			if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: r, Reason: "broken"}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		r.Result = []byte("result")
		rs = append(rs, r)
	}
	if _, err := b.eng.Ack(b.ctx, rs); err != nil {
		t.Fatal(err)
	}
	var got []KeptOutcome
	cur := OutcomeCursor{}
	for range 10 {
		pg, err := b.eng.Outcomes(b.ctx, cur, 2)
		if err != nil {
			t.Fatal(err)
		}
		if pg.Total != 5 {
			t.Fatalf("total %d, want 5", pg.Total)
		}
		got = append(got, pg.Outcomes...)
		if pg.Next.ID == "" {
			break
		}
		cur = pg.Next
	}
	var order []string
	for _, o := range got {
		order = append(order, o.ID)
	}
	if want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if o := got[0]; o.State != StateSucceeded || o.ResultLen != 6 || o.Ended.IsZero() || o.KeptUntil.Before(o.Ended.Add(4*time.Hour)) {
		t.Errorf("succeeded: %+v", o)
	}
	if o := got[3]; o.State != StateDead || o.Error != "broken" {
		t.Errorf("dead: %+v", o)
	}
	// A cursor whose outcome is gone goes on below its score.
	first, err := b.eng.Outcomes(b.ctx, OutcomeCursor{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.client.ZRem(b.ctx, b.eng.Keys().Outcomes(), first.Next.ID).Err(); err != nil {
		t.Fatal(err)
	}
	if pg, err := b.eng.Outcomes(b.ctx, first.Next, 1); err != nil || len(pg.Outcomes) != 1 || pg.Outcomes[0].ID != ids[3] {
		t.Errorf("after a forgotten cursor: %+v %v", pg, err)
	}
}
