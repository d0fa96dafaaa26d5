package inspect

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TestSchedules: list, read, pause, resume, trigger and delete the schedules of a sharded queue.
func TestSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	flow := &engine.FlowSpec{Steps: []engine.FlowStep{{Name: "a", Engine: b.eng("p0")}, {Name: "b", Engine: b.eng("p0"),
		After: []engine.FlowEdge{{Parent: "a"}}}}}
	flow.Steps[0].Message.Partition = "p0"
	flow.Steps[1].Message.Partition = "p0"
	defs := []engine.ScheduleDef{
		{Name: "hourly", ScheduleTiming: engine.ScheduleTiming{Cron: "0 * * * *", TimeZone: "Europe/Paris"},
			Task: &engine.Message{Partition: "p1"}},
		{Name: "pulse", ScheduleTiming: engine.ScheduleTiming{Every: time.Minute}, Task: &engine.Message{Partition: "p2"}},
		{Name: "billing", ScheduleTiming: engine.ScheduleTiming{Cron: "@daily"}, Flow: flow},
	}
	for i := range defs {
		home := b.eng("p0")
		if defs[i].Task != nil {
			home = b.eng(defs[i].Task.Partition)
		}
		if _, err := engine.PutScheduleIn(b.ctx, b.shards, home, &defs[i]); err != nil {
			t.Fatal(err)
		}
	}
	list, err := b.in.Schedules(b.ctx, b.queue, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"billing", "hourly", "pulse"}) {
		t.Fatalf("names %v", names)
	}
	if s := list[0]; s.Kind != "flow" || !slices.Equal(s.Steps, []string{"a", "b"}) || s.Partition != "p0" ||
		s.Shard != engine.ShardOf("p0", 3) || s.Next.IsZero() {
		t.Errorf("billing %+v", s)
	}
	if s := list[1]; s.Kind != "task" || s.Cron != "0 * * * *" || s.TimeZone != "Europe/Paris" || s.Partition != "p1" ||
		s.Shard != engine.ShardOf("p1", 3) || s.Grace != engine.DefaultScheduleGrace {
		t.Errorf("hourly %+v", s)
	}
	if page, err := b.in.Schedules(b.ctx, b.queue, "hourly", 1); err != nil || len(page) != 1 || page[0].Name != "pulse" {
		t.Errorf("page after hourly: %+v %v", page, err)
	}
	if err := b.in.PauseSchedule(b.ctx, b.queue, "pulse"); err != nil {
		t.Fatal(err)
	}
	if s, err := b.in.Schedule(b.ctx, b.queue, "pulse"); err != nil || !s.Paused || !s.Next.IsZero() {
		t.Errorf("paused: %+v %v", s, err)
	}
	if err := b.in.ResumeSchedule(b.ctx, b.queue, "pulse"); err != nil {
		t.Fatal(err)
	}
	id, err := b.in.TriggerSchedule(b.ctx, b.queue, "pulse")
	if err != nil || !strings.HasPrefix(id, "sched/pulse/now-") {
		t.Fatalf("trigger: %q %v", id, err)
	}
	if task, err := b.in.Task(b.ctx, b.queue, id); err != nil || task.Partition != partition.Key("p2") {
		t.Errorf("triggered task: %+v %v", task, err)
	}
	if ok, err := b.in.DeleteSchedule(b.ctx, b.queue, "pulse"); !ok || err != nil {
		t.Errorf("delete: %v %v", ok, err)
	}
	for _, err := range []error{b.in.PauseSchedule(b.ctx, b.queue, "pulse"), b.in.ResumeSchedule(b.ctx, b.queue, "pulse")} {
		if !errors.Is(err, engine.ErrScheduleNotFound) {
			t.Errorf("a deleted schedule: %v", err)
		}
	}
	if _, err := b.in.Schedules(b.ctx, "nope", "", 10); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown queue: %v", err)
	}
	if _, err := b.in.Schedules(b.ctx, b.queue, "", MaxSchedules+1); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("limit too large: %v", err)
	}
}

// TestOverdueSchedules: a schedule whose next tick is more than its Grace in the past (no worker
// fired it) is flagged overdue and counted, on whichever shard it lives; one whose tick is late
// by less than its Grace, a paused one and one in the future are not.
func TestOverdueSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string, p partition.Key, grace time.Duration, next time.Time, paused bool) {
		t.Helper()
		home := b.eng(p)
		def := &engine.ScheduleDef{Name: name, ScheduleTiming: engine.ScheduleTiming{Every: time.Hour, Grace: grace},
			Task: &engine.Message{Partition: p}}
		if _, err := engine.PutScheduleIn(b.ctx, b.shards, home, def); err != nil {
			t.Fatal(err)
		}
		if paused {
			if err := home.PauseSchedule(b.ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		if next.IsZero() {
			return
		}
		// As if every process that fires it stopped before that tick: the record and the due
		// index still say it.
		ms := next.UnixMilli()
		pipe := b.client.TxPipeline()
		pipe.HSet(b.ctx, home.Keys().Schedule(name), "n", ms)
		if !paused {
			pipe.ZAdd(b.ctx, home.Keys().SchedulesDue(), redis.Z{Score: float64(ms), Member: name})
		}
		if _, err := pipe.Exec(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	put("stopped", "p1", 0, now.Add(-14*time.Minute-31*time.Second), false)
	put("short-grace", "p2", 2*time.Second, now.Add(-10*time.Second), false)
	put("late-within-grace", "p3", 0, now.Add(-30*time.Second), false)
	put("paused", "p4", 0, now.Add(-time.Hour), true)
	put("future", "p5", 0, time.Time{}, false)

	list, err := b.in.Schedules(b.ctx, b.queue, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range list {
		got[s.Name] = s.Overdue
	}
	want := map[string]bool{"stopped": true, "short-grace": true, "late-within-grace": false, "paused": false, "future": false}
	if !maps.Equal(got, want) {
		t.Errorf("overdue flags %v, want %v", got, want)
	}
	if s, err := b.in.Schedule(b.ctx, b.queue, "stopped"); err != nil || !s.Overdue {
		t.Errorf("Schedule(stopped): overdue %v, %v", s.Overdue, err)
	}
	if s, err := b.in.Schedule(b.ctx, b.queue, "late-within-grace"); err != nil || s.Overdue {
		t.Errorf("Schedule(late-within-grace): overdue %v, %v", s.Overdue, err)
	}
	if n, err := b.in.OverdueSchedules(b.ctx, b.queue); err != nil || n != 2 {
		t.Errorf("OverdueSchedules = %d, %v; want 2", n, err)
	}
	// Fired again (the tick published, the next one an hour ahead), it is no longer overdue.
	home := b.eng("p1")
	res, err := home.FireSchedules(b.ctx, 10)
	if err != nil || len(res.Missed) == 0 {
		t.Fatalf("fire: %+v %v", res, err)
	}
	if n, err := b.in.OverdueSchedules(b.ctx, b.queue); err != nil || n != 1 {
		t.Errorf("after the firing, OverdueSchedules = %d, %v; want 1 (short-grace, on another shard)", n, err)
	}
}
