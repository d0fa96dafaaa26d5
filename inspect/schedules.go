package inspect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// Schedule is one schedule of a queue as the Inspector shows it (docs/schedules.md).
type Schedule struct {
	Name  string `json:"name"`
	Shard int    `json:"shard"`
	// Cron and TimeZone, or Every, say when it ticks. TimeZone is the IANA zone Cron is read in,
	// "UTC" for a schedule that set none, and "" for a schedule of Every.
	Cron     string        `json:"cron,omitempty"`
	TimeZone string        `json:"time_zone,omitempty"`
	Every    time.Duration `json:"every_ns,omitempty"`
	Jitter   time.Duration `json:"jitter_ns,omitempty"`
	CatchUp  int           `json:"catch_up"`
	Grace    time.Duration `json:"grace_ns"`
	// Kind is "task", or "flow" for a schedule that publishes a flow each tick.
	Kind string `json:"kind"`
	// Partition is the partition of a task schedule's ticks, or of a flow's first step.
	Partition partition.Key `json:"partition"`
	// Steps names the steps of a flow schedule's flow.
	Steps  []string `json:"steps,omitempty"`
	Paused bool     `json:"paused"`
	// Next is the next tick; zero while paused or when it has none left.
	Next time.Time `json:"next"`
	// LastTick is the last tick published, LastFired when it was; zero before the first.
	LastTick  time.Time `json:"last_tick"`
	LastFired time.Time `json:"last_fired"`
	Fired     int64     `json:"fired"`
	Missed    int64     `json:"missed"`
	// Overdue says the schedule is active and its next tick was more than Grace in the past when
	// it was read: no worker fired it in time (engine.ScheduleInfo.Overdue), so every process that
	// fires it has stopped or cannot reach Redis, and the tick will count as missed.
	Overdue bool      `json:"overdue"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// MaxSchedules is the most schedules one Schedules call returns.
const MaxSchedules = 500

func scheduleOf(in engine.ScheduleInfo, engs []*engine.Engine) Schedule {
	s := Schedule{Name: in.Name, Shard: slices.Index(engs, in.Shard), Cron: in.Cron, TimeZone: in.TimeZone,
		Every: in.Every, Jitter: in.Jitter, CatchUp: in.CatchUp, Grace: in.Grace, Kind: "task", Paused: in.Paused,
		Next: in.Next, LastTick: in.LastTick, LastFired: in.LastFired, Fired: in.Fired, Missed: in.Missed,
		Overdue: in.Overdue(), Created: in.Created, Updated: in.Updated}
	if s.Cron != "" && s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if in.Task != nil {
		s.Partition = in.Task.Partition
	}
	if in.Flow != nil {
		s.Kind = "flow"
		for i, st := range in.Flow {
			if i == 0 {
				s.Partition = st.Partition
			}
			s.Steps = append(s.Steps, st.Name)
		}
	}
	return s
}

// Schedules returns up to limit (default 50, at most MaxSchedules) schedules of queue in name
// order, those after the name after ("" from the first): one call per shard, O(limit) each. It
// fails with engine.ErrInvalid for a bad limit or name, engine.ErrNotFound for an unknown queue,
// and Redis's error.
func (in *Inspector) Schedules(ctx context.Context, queue, after string, limit int) ([]Schedule, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > MaxSchedules {
		return nil, fmt.Errorf("inspect: %w: limit %d is outside [1, %d]", engine.ErrInvalid, limit, MaxSchedules)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, err
	}
	list, err := engine.ListSchedulesIn(ctx, engs, after, limit)
	if err != nil {
		return nil, fmt.Errorf("inspect: schedules of %q: %w", queue, err)
	}
	out := make([]Schedule, len(list))
	for i, s := range list {
		out[i] = scheduleOf(s, engs)
	}
	return out, nil
}

// Schedule returns schedule name of queue. It fails with engine.ErrScheduleNotFound (which
// matches engine.ErrNotFound) for an unknown schedule, engine.ErrNotFound for an unknown queue,
// and Redis's error.
func (in *Inspector) Schedule(ctx context.Context, queue, name string) (Schedule, error) {
	var out Schedule
	err := in.onSchedule(ctx, queue, name, "read", func(engs []*engine.Engine, s engine.ScheduleInfo) error {
		out = scheduleOf(s, engs)
		return nil
	})
	return out, err
}

// PauseSchedule pauses schedule name of queue: it publishes nothing until resumed. It fails as
// Schedule does.
func (in *Inspector) PauseSchedule(ctx context.Context, queue, name string) error {
	return in.onSchedule(ctx, queue, name, "pause", func(_ []*engine.Engine, s engine.ScheduleInfo) error {
		return s.Shard.PauseSchedule(ctx, name)
	})
}

// ResumeSchedule resumes schedule name of queue at its first tick after now. It fails as Schedule
// does, and with engine.ErrInvalid when this process cannot load the schedule's time zone.
func (in *Inspector) ResumeSchedule(ctx context.Context, queue, name string) error {
	return in.onSchedule(ctx, queue, name, "resume", func(_ []*engine.Engine, s engine.ScheduleInfo) error {
		return s.Shard.ResumeSchedule(ctx, name)
	})
}

// TriggerSchedule publishes schedule name's task (or flow) of queue now, outside its ticks, and
// returns its id. It fails as Schedule does, and with the publish's error.
func (in *Inspector) TriggerSchedule(ctx context.Context, queue, name string) (string, error) {
	var id string
	err := in.onSchedule(ctx, queue, name, "trigger", func(_ []*engine.Engine, s engine.ScheduleInfo) error {
		var err error
		id, err = s.Shard.TriggerSchedule(ctx, name)
		return err
	})
	return id, err
}

// DeleteSchedule deletes schedule name of queue, which stops it, and reports whether it existed.
// It fails with engine.ErrNotFound for an unknown queue, and Redis's error.
func (in *Inspector) DeleteSchedule(ctx context.Context, queue, name string) (bool, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return false, err
	}
	ok, err := engine.DeleteScheduleIn(ctx, engs, name)
	if err != nil {
		return ok, fmt.Errorf("inspect: delete schedule %q of %q: %w", name, queue, err)
	}
	return ok, nil
}

// onSchedule finds schedule name of queue and runs f on it.
func (in *Inspector) onSchedule(ctx context.Context, queue, name, what string,
	f func([]*engine.Engine, engine.ScheduleInfo) error) error {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return err
	}
	s, err := engine.FindSchedule(ctx, engs, name)
	if err == nil {
		err = f(engs, s)
	}
	if err != nil {
		return fmt.Errorf("inspect: %s schedule %q of %q: %w", what, name, queue, err)
	}
	return nil
}

// OverdueSchedules counts the overdue schedules of queue (Schedule.Overdue), over its shards: per
// shard two round trips, which read the records only of the schedules due more than a second ago
// (engine.OverdueSchedules), at most engine.MaxOverdueLook of them, so the count is a lower bound
// past that. It fails with engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) OverdueSchedules(ctx context.Context, queue string) (int, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return 0, err
	}
	counts := make([]int, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		names, _, err := e.OverdueSchedules(ctx)
		counts[i] = len(names)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("inspect: overdue schedules of %q: %w", queue, err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n, nil
}
