package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// TestScheduleCommands: srq schedule list, show, pause, resume, trigger and delete.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"nightly", "pulse", "weekly"} {
		def := &engine.ScheduleDef{Name: name, ScheduleTiming: engine.ScheduleTiming{Cron: "0 2 * * *", TimeZone: "Europe/Berlin"},
			Task: &engine.Message{Partition: "acct"}}
		if name == "pulse" {
			def.ScheduleTiming = engine.ScheduleTiming{Every: time.Minute}
		}
		if _, err := f.eng.PutSchedule(f.ctx, def); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := f.run("", "--queue", "q", "schedule", "list", "--limit", "2")
	if code != 0 || !strings.Contains(out, "nightly") || !strings.Contains(out, "0 2 * * * (Europe/Berlin)") ||
		!strings.Contains(out, "every 1m0s") || strings.Contains(out, "weekly") || !strings.Contains(out, "--after pulse") {
		t.Errorf("list: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := f.run("", "--queue", "q", "schedule", "pause", "pulse"); code != 0 || out != "paused schedule \"pulse\" of queue \"q\"\n" {
		t.Errorf("pause: %d %q %s", code, out, errs)
	}
	code, out, _ = f.run("", "--queue", "q", "--json", "schedule", "show", "pulse")
	var s inspect.Schedule
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || !s.Paused || s.Every != time.Minute || s.Kind != "task" {
		t.Errorf("show --json: %d %v %s", code, err, out)
	}
	if code, out, errs := f.run("", "--queue", "q", "schedule", "resume", "pulse"); code != 0 || !strings.HasPrefix(out, "resumed") {
		t.Errorf("resume: %d %q %s", code, out, errs)
	}
	code, out, _ = f.run("", "--queue", "q", "--json", "schedule", "trigger", "nightly")
	var act ScheduleActionJSON
	if err := json.Unmarshal([]byte(out), &act); code != 0 || err != nil || !strings.HasPrefix(act.ID, "sched/nightly/now-") {
		t.Errorf("trigger: %d %v %s", code, err, out)
	}
	if code, _, errs := f.run("no\n", "--queue", "q", "schedule", "delete", "weekly"); code != 1 || !strings.Contains(errs, "not confirmed") {
		t.Errorf("delete refused: %d %s", code, errs)
	}
	if code, out, errs := f.run("yes\n", "--queue", "q", "schedule", "delete", "weekly"); code != 0 || !strings.HasPrefix(out, "deleted") {
		t.Errorf("delete: %d %q %s", code, out, errs)
	}
	if code, _, errs := f.run("", "--queue", "q", "--yes", "schedule", "delete", "weekly"); code != 1 || !strings.Contains(errs, "no schedule") {
		t.Errorf("delete again: %d %s", code, errs)
	}
	if code, _, errs := f.run("", "--queue", "q", "schedule", "pause", "nope"); code != 1 || !strings.Contains(errs, "schedule not found") {
		t.Errorf("pause an unknown schedule: %d %s", code, errs)
	}
	if code, _, _ := f.run("", "--queue", "q", "schedule", "frobnicate"); code != 2 {
		t.Errorf("unknown subcommand: exit %d, want 2", code)
	}
	if code, _, _ := f.run("", "--queue", "q", "schedule", "show"); code != 2 {
		t.Errorf("show without a name: exit %d, want 2", code)
	}
}

// TestScheduleOverdue: a schedule whose next tick is more than its grace in the past shows the
// state overdue in schedule list and show, with a note that says what it means, and "overdue":
// true in the JSON; a schedule on time shows active.
func TestScheduleOverdue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, name := range []string{"stopped", "fine"} {
		def := &engine.ScheduleDef{Name: name, ScheduleTiming: engine.ScheduleTiming{Every: time.Hour}, Task: &engine.Message{}}
		if _, err := f.eng.PutSchedule(f.ctx, def); err != nil {
			t.Fatal(err)
		}
	}
	now, err := f.client.Time(f.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// As if every worker stopped 14m31s before now: the record and the due index still say the tick.
	ms := now.Add(-14*time.Minute - 31*time.Second).UnixMilli()
	if err := f.client.HSet(f.ctx, f.eng.Keys().Schedule("stopped"), "n", ms).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.client.ZAdd(f.ctx, f.eng.Keys().SchedulesDue(), redis.Z{Score: float64(ms), Member: "stopped"}).Err(); err != nil {
		t.Fatal(err)
	}
	out := f.ok("", "--queue", "q", "schedule", "list")
	lines := strings.Split(out, "\n")
	if len(lines) < 4 || !strings.Contains(lines[1], "active") || !strings.HasPrefix(lines[1], "fine") ||
		!strings.Contains(lines[2], "overdue") || !strings.HasPrefix(lines[2], "stopped") ||
		!strings.HasPrefix(lines[3], "overdue: active, but its next tick is more than its grace in the past") {
		t.Errorf("schedule list:\n%s", out)
	}
	if out := f.ok("", "--queue", "q", "schedule", "show", "stopped"); !strings.Contains(out, "state       overdue") ||
		!strings.Contains(out, "no worker fired it") {
		t.Errorf("schedule show:\n%s", out)
	}
	var list []inspect.Schedule
	if err := json.Unmarshal([]byte(f.ok("", "--queue", "q", "--json", "schedule", "list")), &list); err != nil ||
		len(list) != 2 || list[0].Overdue || !list[1].Overdue {
		t.Errorf("schedule list --json: %+v %v", list, err)
	}
}
