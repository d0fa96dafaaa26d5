package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/srqueue/srq/inspect"
)

// scheduleUsage is the part of the usage text about schedules.
const scheduleUsage = `  schedule list                schedules with their next and last tick: --after NAME, --limit N
  schedule show <name>         one schedule
  schedule pause <name>        stop publishing its ticks until resumed
  schedule resume <name>       resume at its first tick after now
  schedule trigger <name>      publish its task (or flow) now, outside its ticks
  schedule delete <name>       delete it (asks unless --yes)
`

// ScheduleActionJSON is what schedule pause, resume, trigger and delete print with --json.
type ScheduleActionJSON struct {
	Action   string `json:"action"`
	Schedule string `json:"schedule"`
	// ID is the id of the task (or flow) a trigger published.
	ID string `json:"id,omitempty"`
	// Existed says whether a deleted schedule existed; when it did not, srq exits with 1 after
	// printing it.
	Existed *bool `json:"existed,omitempty"`
}

// schedule runs "srq schedule <sub> …".
func (c *cli) schedule(args []string) error {
	subs := map[string]func([]string) error{"list": c.scheduleList, "show": c.scheduleShow,
		"pause": c.scheduleAction("pause"), "resume": c.scheduleAction("resume"),
		"trigger": c.scheduleAction("trigger"), "delete": c.scheduleAction("delete")}
	if len(args) == 0 {
		return usagef("schedule needs a subcommand: list, show, pause, resume, trigger or delete")
	}
	f, ok := subs[args[0]]
	if !ok {
		return usagef("unknown schedule subcommand %q: want list, show, pause, resume, trigger or delete", args[0])
	}
	return f(args[1:])
}

func (c *cli) scheduleList(args []string) error {
	fs := c.flags("schedule list")
	after := fs.String("after", "", "list the schedules after this name")
	limit := fs.Int("limit", 50, fmt.Sprintf("most schedules to list (1 to %d)", inspect.MaxSchedules))
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("schedule list takes no arguments"))
	}
	if *limit < 1 || *limit > inspect.MaxSchedules {
		return usagef("--limit %d is outside [1, %d]", *limit, inspect.MaxSchedules)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	// One more than the page, to know whether another page follows.
	list, err := c.in.Schedules(c.ctx, c.opts.queue, *after, min(*limit+1, inspect.MaxSchedules))
	if err != nil {
		return c.explain(err)
	}
	more := len(list) > *limit
	list = list[:min(len(list), *limit)]
	if c.opts.json {
		return c.emitJSON(list)
	}
	next := ""
	if more {
		next = c.again(fs, map[string]string{"after": list[len(list)-1].Name})
	}
	if err := printSchedules(c.stdout, list); err != nil {
		return err
	}
	return printNext(c.stdout, next)
}

func (c *cli) scheduleShow(args []string) error {
	name, err := c.scheduleName("show", args)
	if err != nil {
		return err
	}
	s, err := c.in.Schedule(c.ctx, c.opts.queue, name)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(s)
	}
	return printSchedule(c.stdout, s)
}

// scheduleName parses the arguments of a schedule subcommand that takes one name, and connects.
func (c *cli) scheduleName(verb string, args []string) (string, error) {
	fs := c.flags("schedule " + verb)
	pos, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("schedule %s needs exactly one schedule name", verb)
	}
	return pos[0], c.needQueue()
}

// scheduleAction returns the command that pauses, resumes, triggers or deletes one schedule.
func (c *cli) scheduleAction(verb string) func([]string) error {
	return func(args []string) error {
		name, err := c.scheduleName(verb, args)
		if err != nil {
			return err
		}
		out := ScheduleActionJSON{Action: verb, Schedule: name}
		msg := fmt.Sprintf("%sd schedule %q of queue %q", verb, name, c.opts.queue)
		switch verb {
		case "pause":
			err = c.in.PauseSchedule(c.ctx, c.opts.queue, name)
		case "resume":
			err = c.in.ResumeSchedule(c.ctx, c.opts.queue, name)
		case "trigger":
			out.ID, err = c.in.TriggerSchedule(c.ctx, c.opts.queue, name)
			msg = fmt.Sprintf("triggered schedule %q of queue %q: published %s", name, c.opts.queue, out.ID)
		case "delete":
			if err := c.confirm(fmt.Sprintf("Delete schedule %q of queue %q: it publishes nothing more", name, c.opts.queue)); err != nil {
				return err
			}
			var ok bool
			ok, err = c.in.DeleteSchedule(c.ctx, c.opts.queue, name)
			out.Existed = &ok
			if err == nil && !ok {
				// Nothing to delete: with --json the object says so (existed: false), then the error.
				missing := fmt.Errorf("queue %q has no schedule %q; 'srq schedule list' lists them", c.opts.queue, name)
				if c.opts.json {
					if err := c.emitJSON(out); err != nil {
						return err
					}
				}
				return missing
			}
		}
		if err != nil {
			return c.explain(err)
		}
		if c.opts.json {
			return c.emitJSON(out)
		}
		_, err = fmt.Fprintln(c.stdout, msg)
		return err
	}
}

// when says when a schedule ticks: its cron expression and zone, or its interval.
func when(s inspect.Schedule) string {
	if s.Cron == "" {
		return "every " + s.Every.String()
	}
	if s.TimeZone != "" {
		return s.Cron + " (" + s.TimeZone + ")"
	}
	return s.Cron + " (UTC)"
}

func printSchedules(w io.Writer, list []inspect.Schedule) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no schedules")
		return err
	}
	rows := [][]string{{"SCHEDULE", "WHEN", "KIND", "PARTITION", "STATE", "NEXT", "LAST TICK", "FIRED", "MISSED"}}
	for _, s := range list {
		state := scheduleState(s)
		rows = append(rows, []string{s.Name, when(s), s.Kind, partName(string(s.Partition)), state, ts(s.Next),
			ts(s.LastTick), fmt.Sprint(s.Fired), fmt.Sprint(s.Missed)})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	return overdueNote(w, slices.ContainsFunc(list, func(s inspect.Schedule) bool { return s.Overdue }))
}

// overdueNote explains the state overdue under a table that shows one.
func overdueNote(w io.Writer, shown bool) error {
	if !shown {
		return nil
	}
	_, err := fmt.Fprintln(w, "overdue: active, but its next tick is more than its grace in the past: no worker fired it "+
		"(every worker of the queue stopped, or cannot reach Redis); the tick will count as missed")
	return err
}

func printSchedule(w io.Writer, s inspect.Schedule) error {
	rows := [][]string{
		{"schedule", s.Name}, {"when", when(s)}, {"kind", s.Kind}, {"partition", partName(string(s.Partition))},
		{"shard", fmt.Sprint(s.Shard)}, {"paused", yesNo(s.Paused)}, {"state", scheduleState(s)}, {"next", ts(s.Next)}, {"last tick", ts(s.LastTick)},
		{"last fired", ts(s.LastFired)}, {"fired", fmt.Sprint(s.Fired)}, {"missed", fmt.Sprint(s.Missed)},
		{"catch up", fmt.Sprint(s.CatchUp)}, {"grace", s.Grace.String()}, {"jitter", s.Jitter.String()},
		{"created", ts(s.Created)}, {"updated", ts(s.Updated)},
	}
	if len(s.Steps) > 0 {
		rows = append(rows, []string{"steps", strings.Join(s.Steps, ", ")})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	return overdueNote(w, s.Overdue)
}

// scheduleState is "paused", "overdue" (active, and its next tick more than its grace in the
// past: no worker fires it) or "active".
func scheduleState(s inspect.Schedule) string {
	switch {
	case s.Paused:
		return "paused"
	case s.Overdue:
		return "overdue"
	}
	return "active"
}
