package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
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
	s := decodeStrict[jsonEverySchedule](t, f.ok("", "--queue", "q", "--json", "schedule", "show", "pulse"))
	if !s.Paused || s.EveryNS != int64(time.Minute) || s.Kind != "task" || s.Partition != "acct" {
		t.Errorf("show --json: %+v", s)
	}
	if n := decodeStrict[jsonCronSchedule](t, f.ok("", "--queue", "q", "--json", "schedule", "show", "nightly")); n.Cron != "0 2 * * *" ||
		n.TimeZone != "Europe/Berlin" {
		t.Errorf("show --json of a cron schedule: %+v", n)
	}
	if a := decodeStrict[jsonScheduleAction](t, f.ok("", "--queue", "q", "--json", "schedule", "pause", "pulse")); a != (jsonScheduleAction{Action: "pause", Schedule: "pulse"}) {
		t.Errorf("pause --json: %+v", a)
	}
	if code, out, errs := f.run("", "--queue", "q", "schedule", "resume", "pulse"); code != 0 || !strings.HasPrefix(out, "resumed") {
		t.Errorf("resume: %d %q %s", code, out, errs)
	}
	if act := decodeStrict[jsonScheduleTrigger](t, f.ok("", "--queue", "q", "--json", "schedule", "trigger", "nightly")); act.Action != "trigger" ||
		act.Schedule != "nightly" || !strings.HasPrefix(act.ID, "sched/nightly/now-") {
		t.Errorf("trigger: %+v", act)
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
	list := decodeStrict[[]jsonEverySchedule](t, f.ok("", "--queue", "q", "--json", "schedule", "list"))
	if len(list) != 2 || list[0].Overdue || !list[1].Overdue {
		t.Errorf("schedule list --json: %+v", list)
	}
}

// The JSON of the schedule commands, as docs/cli.md documents it: a cron schedule has cron and
// time_zone, an interval one every_ns; jitter_ns only when set, steps only for a flow.
type (
	jsonScheduleCommon struct {
		Name      string    `json:"name"`
		Shard     int       `json:"shard"`
		JitterNS  int64     `json:"jitter_ns,omitempty"`
		CatchUp   int       `json:"catch_up"`
		GraceNS   int64     `json:"grace_ns"`
		Kind      string    `json:"kind"`
		Partition string    `json:"partition"`
		Steps     []string  `json:"steps,omitempty"`
		Paused    bool      `json:"paused"`
		Next      time.Time `json:"next"`
		LastTick  time.Time `json:"last_tick"`
		LastFired time.Time `json:"last_fired"`
		Fired     int64     `json:"fired"`
		Missed    int64     `json:"missed"`
		Overdue   bool      `json:"overdue"`
		Created   time.Time `json:"created"`
		Updated   time.Time `json:"updated"`
	}
	jsonCronSchedule struct {
		Cron     string `json:"cron"`
		TimeZone string `json:"time_zone"`
		jsonScheduleCommon
	}
	jsonEverySchedule struct {
		EveryNS int64 `json:"every_ns"`
		jsonScheduleCommon
	}
	jsonScheduleAction struct {
		Action   string `json:"action"`
		Schedule string `json:"schedule"`
	}
	jsonScheduleTrigger struct {
		Action   string `json:"action"`
		Schedule string `json:"schedule"`
		ID       string `json:"id"`
	}
	jsonScheduleDelete struct {
		Action   string `json:"action"`
		Schedule string `json:"schedule"`
		Existed  bool   `json:"existed"`
	}
)

// TestScheduleJSONSchema: schedule list and show print exactly the documented fields: a cron
// schedule its time_zone, "UTC" when it set none; an interval one every_ns; jitter_ns only when
// set and steps only for a flow. schedule delete says existed: true, or existed: false and exits
// with 1 for a schedule there is not.
func TestScheduleJSONSchema(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	defs := []*engine.ScheduleDef{
		{Name: "a-utc", ScheduleTiming: engine.ScheduleTiming{Cron: "0 2 * * *"}, Task: &engine.Message{Partition: "p"}},
		{Name: "b-zoned", ScheduleTiming: engine.ScheduleTiming{Cron: "0 2 * * *", TimeZone: "Europe/Berlin"}, Task: &engine.Message{}},
		{Name: "c-jitter", ScheduleTiming: engine.ScheduleTiming{Every: time.Hour, Jitter: time.Second}, Task: &engine.Message{}},
		{Name: "d-flow", ScheduleTiming: engine.ScheduleTiming{Every: time.Hour},
			Flow: &engine.FlowSpec{Steps: []engine.FlowStep{{Name: "one", Engine: f.eng}, {Name: "two", Engine: f.eng,
				After: []engine.FlowEdge{{Parent: "one"}}}}}},
	}
	for _, def := range defs {
		if _, err := f.eng.PutSchedule(f.ctx, def); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name, data string) {
		t.Helper()
		switch name {
		case "a-utc", "b-zoned":
			s := decodeStrict[jsonCronSchedule](t, data)
			if zone := map[string]string{"a-utc": "UTC", "b-zoned": "Europe/Berlin"}[name]; s.Name != name || s.TimeZone != zone ||
				s.Cron != "0 2 * * *" || s.Kind != "task" {
				t.Errorf("%s: %+v; want time_zone %q", name, s, zone)
			}
		case "c-jitter", "d-flow":
			s := decodeStrict[jsonEverySchedule](t, data)
			if s.Name != name || s.EveryNS != int64(time.Hour) || (name == "c-jitter") != (s.JitterNS == int64(time.Second)) ||
				(name == "d-flow") != (s.Kind == "flow" && len(s.Steps) == 2) {
				t.Errorf("%s: %+v", name, s)
			}
		default:
			t.Errorf("unexpected schedule %q", name)
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(f.ok("", "--queue", "q", "--json", "schedule", "list")), &list); err != nil || len(list) != len(defs) {
		t.Fatalf("schedule list --json: %d schedules, %v", len(list), err)
	}
	for i, raw := range list {
		check(defs[i].Name, string(raw))
		check(defs[i].Name, f.ok("", "--queue", "q", "--json", "schedule", "show", defs[i].Name))
	}

	if d := decodeStrict[jsonScheduleDelete](t, f.ok("", "--queue", "q", "--json", "--yes", "schedule", "delete", "a-utc")); d != (jsonScheduleDelete{Action: "delete", Schedule: "a-utc", Existed: true}) {
		t.Errorf("delete --json: %+v", d)
	}
	code, out, errOut := f.run("", "--queue", "q", "--json", "--yes", "schedule", "delete", "a-utc")
	if code != 1 || errOut != "srq: queue \"q\" has no schedule \"a-utc\"; 'srq schedule list' lists them\n" {
		t.Fatalf("delete --json of a schedule there is not: exit %d, stderr %q; want exit 1", code, errOut)
	}
	if d := decodeStrict[jsonScheduleDelete](t, out); d != (jsonScheduleDelete{Action: "delete", Schedule: "a-utc", Existed: false}) {
		t.Errorf("delete --json of a schedule there is not: %+v", d)
	}
}
