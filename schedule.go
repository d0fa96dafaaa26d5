package srq

import (
	"context"
	"fmt"
	"time"

	"github.com/srqueue/srq/engine"
)

// ScheduleOpts say when a schedule ticks and how each tick's task is published. Exactly one of
// Cron and Every is set.
type ScheduleOpts struct {
	// Cron is a cron expression: "minute hour day-of-month month day-of-week", with an optional
	// seconds field first ("*/10 * * * * *"), or a descriptor: @yearly, @monthly, @weekly,
	// @daily, @hourly, or "@every 90s" (read as Every).
	Cron string
	// TimeZone is the IANA time zone Cron is read in, such as "Europe/Berlin". Default UTC. Every
	// process that fires schedules must be able to load it (import time/tzdata where the machine
	// has no zone database).
	TimeZone string
	// Every is a fixed interval: the schedule ticks at its multiples since the Unix epoch, so
	// time.Hour ticks on the hour (UTC). At least MinScheduleEvery.
	Every time.Duration
	// Jitter makes each tick's task available up to this much after the tick, the same delay for
	// every process that fires it, so that many schedules of one tick do not land at once.
	Jitter time.Duration
	// CatchUp is how many missed ticks are published after an outage, the latest ones, oldest
	// first. Default 0: missed ticks are skipped and the schedule goes on with its next tick.
	// At most MaxCatchUp.
	CatchUp int
	// Grace is how late a tick may be fired and still count as on time; an older tick counts as
	// missed. Default DefaultScheduleGrace (a minute); at least a second.
	Grace time.Duration
	// Publish are the options of each tick's task: Partition, Ordered, Priority, MaxAttempts,
	// Headers, Delay (counted from the tick), KeepResult and OnDeadLetter. ID and At must be
	// unset (a tick's id is derived from the schedule's name and the tick, TickID), and Wait
	// false. For ScheduleFlow it must be zero: the flow's steps carry their options.
	Publish PublishOpts
}

// Limits of a schedule.
const (
	// MinScheduleEvery is the shortest interval: a schedule ticks at most once a second.
	MinScheduleEvery = engine.MinScheduleEvery
	// MaxCatchUp is the most missed ticks a schedule may catch up.
	MaxCatchUp = engine.MaxCatchUp
	// DefaultScheduleGrace is the Grace of a schedule that sets none.
	DefaultScheduleGrace = engine.DefaultScheduleGrace
	// MaxScheduleNameLen is the longest schedule name, in bytes.
	MaxScheduleNameLen = engine.MaxScheduleNameLen
)

// ScheduleInfo is a schedule as stored, with its state: paused or not, its next tick, its last
// tick and when it was published, and how many ticks it published and missed.
type ScheduleInfo = engine.ScheduleInfo

// FiredTick is one tick a Scheduler published: the schedule, the tick's time, and the id of its
// task or, for a flow schedule (Flow set), of its flow.
type FiredTick = engine.FiredTick

// ErrScheduleNotFound is wrapped by the error for a schedule that does not exist; it matches
// ErrNotFound too.
var ErrScheduleNotFound = engine.ErrScheduleNotFound

// TickID returns the id of the task, or of the flow, that schedule name publishes for its tick at
// tick: "sched/<name>/<Unix ms>". Ids of this form are the schedules'; do not publish tasks with
// them.
func TickID(name string, tick time.Time) string { return engine.TickID(name, tick) }

// timing turns o's timing fields into the engine's.
func (o *ScheduleOpts) timing() engine.ScheduleTiming {
	return engine.ScheduleTiming{Cron: o.Cron, TimeZone: o.TimeZone, Every: o.Every, Jitter: o.Jitter,
		CatchUp: o.CatchUp, Grace: o.Grace}
}

// Schedule creates or updates (upserts) the schedule name of q: each of its ticks publishes v,
// encoded with the queue's codec, with opts.Publish, under the id TickID(name, tick). An update
// keeps the schedule's state (paused or not, counters) and, when its timing is unchanged, its
// next tick; a new timing starts at its first tick after now. Ticks are published by the queue's
// Workers while they run and by any Scheduler that fires the queue, any number at once, each tick
// once (docs/schedules.md). It fails with ErrInvalid, writing nothing, for a nil opts, a bad name, an
// invalid cron expression, an unknown time zone, an interval under MinScheduleEvery, Cron and Every
// both or neither set, or publish options Publish refuses; with the codec's error when v cannot be
// encoded, writing nothing; with an error wrapping ErrShardCount when the queue is registered
// with another shard count; and with the context's or Redis's error, after which the schedule may
// or may not be written (put it again).
func (q *Queue[T]) Schedule(ctx context.Context, name string, v T, opts *ScheduleOpts) (ScheduleInfo, error) {
	if !q.made() {
		return ScheduleInfo{}, errNotMade
	}
	if opts == nil {
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: nil ScheduleOpts (a schedule needs Cron or Every)", ErrInvalid, name)
	}
	if o := opts.Publish; o.ID != "" || !o.At.IsZero() || o.Wait {
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: Publish.ID, At or Wait is set; a tick's task gets its id and time from the tick",
			ErrInvalid, name)
	}
	msgs, err := q.messages([]Message[T]{{Value: v, Opts: opts.Publish}})
	if err != nil {
		return ScheduleInfo{}, fmt.Errorf("schedule %q: %w", name, err)
	}
	def := &engine.ScheduleDef{Name: name, ScheduleTiming: opts.timing(), Task: &msgs[0]}
	return q.putSchedule(ctx, q.shards.of(msgs[0].Partition), def, nil)
}

// ScheduleFlow creates or updates (upserts) the schedule name of q whose ticks each publish the
// flow f, as PublishFlow would, with the flow id TickID(name, tick); opts.Publish must be zero.
// The flow's first step must be of q: the schedule lives with the flow. f.ID must be empty, f.Keep
// 0 or at least an hour (a tick's flow is found by its id for that long, which keeps a flow whose
// publisher died from being published twice), and f.Middleware empty (it is not stored). It fails
// as Schedule does, and with ErrInvalid for a flow PublishFlow would refuse.
func (q *Queue[T]) ScheduleFlow(ctx context.Context, name string, f *Flow, opts *ScheduleOpts) (ScheduleInfo, error) {
	if !q.made() {
		return ScheduleInfo{}, errNotMade
	}
	switch {
	case opts == nil:
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: nil ScheduleOpts (a schedule needs Cron or Every)", ErrInvalid, name)
	case f == nil || len(f.Steps) == 0 || f.Steps[0] == nil:
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: a flow needs at least one step", ErrInvalid, name)
	case !isZeroPublishOpts(&opts.Publish):
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: ScheduleOpts.Publish is set; the flow's steps carry their options", ErrInvalid, name)
	case len(f.Middleware) > 0:
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: the flow has Middleware, which a schedule does not keep", ErrInvalid, name)
	case f.ID != "":
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: the flow has an ID; each tick's flow id is TickID(name, tick)", ErrInvalid, name)
	case f.Steps[0].shards != q.shards:
		return ScheduleInfo{}, fmt.Errorf("%w: schedule %q: the flow's first step %q is of queue %q, not %q",
			ErrInvalid, name, f.Steps[0].name, f.Steps[0].queue, q.name)
	}
	// The id is a stand-in: each tick's flow gets its own, and the header with it (FlowHeader).
	spec, registered, err := flowSpec(f, engine.TickID(name, time.Time{}))
	if err != nil {
		return ScheduleInfo{}, fmt.Errorf("schedule %q: %w", name, err)
	}
	spec.ID = ""
	home := spec.Steps[0].Engine
	def := &engine.ScheduleDef{Name: name, ScheduleTiming: opts.timing(), Flow: spec, FlowHeader: flowHeader}
	return q.putSchedule(ctx, home, def, registered)
}

func isZeroPublishOpts(o *PublishOpts) bool {
	return o.ID == "" && o.Partition == "" && !o.Ordered && o.Priority == 0 && o.Delay == 0 && o.At.IsZero() &&
		o.MaxAttempts == 0 && len(o.Headers) == 0 && o.KeepResult == 0 && !o.Wait && o.OnDeadLetter == 0
}

// putSchedule validates def, registers the queues its ticks publish to, and puts it in home.
func (q *Queue[T]) putSchedule(ctx context.Context, home *engine.Engine, def *engine.ScheduleDef, others []*shardSet) (ScheduleInfo, error) {
	// Validated first, so a refused schedule leaves no trace in Redis (not even a registration).
	if err := home.ValidateSchedule(def); err != nil {
		return ScheduleInfo{}, err
	}
	if err := q.shards.register(ctx); err != nil {
		return ScheduleInfo{}, err
	}
	for _, s := range others {
		if err := s.register(ctx); err != nil {
			return ScheduleInfo{}, err
		}
	}
	return engine.PutScheduleIn(ctx, q.shards.engines, home, def)
}

// GetSchedule reads schedule name of q. It fails with ErrScheduleNotFound when q has no such
// schedule, with ErrInvalid for a nil or zero Queue, and with the context's or Redis's error.
func (q *Queue[T]) GetSchedule(ctx context.Context, name string) (ScheduleInfo, error) {
	if !q.made() {
		return ScheduleInfo{}, errNotMade
	}
	return engine.FindSchedule(ctx, q.shards.engines, name)
}

// Schedules returns up to limit (1 to 1000) schedules of q in name order, starting after the name
// after ("" from the first), with their next and last ticks: O(limit) per shard, never a scan. It
// fails with ErrInvalid for a bad limit or a nil or zero Queue, and with the context's or Redis's
// error.
func (q *Queue[T]) Schedules(ctx context.Context, after string, limit int) ([]ScheduleInfo, error) {
	if !q.made() {
		return nil, errNotMade
	}
	return engine.ListSchedulesIn(ctx, q.shards.engines, after, limit)
}

// PauseSchedule pauses schedule name of q: it publishes nothing until resumed, and its ticks
// meanwhile are never published. It fails with ErrScheduleNotFound, with ErrInvalid for a nil or
// zero Queue, and with the context's or Redis's error.
func (q *Queue[T]) PauseSchedule(ctx context.Context, name string) error {
	return q.onSchedule(ctx, name, (*engine.Engine).PauseSchedule)
}

// ResumeSchedule resumes schedule name of q at its first tick after now. It fails as
// PauseSchedule does, and with ErrInvalid when this process cannot load the schedule's time zone.
func (q *Queue[T]) ResumeSchedule(ctx context.Context, name string) error {
	return q.onSchedule(ctx, name, (*engine.Engine).ResumeSchedule)
}

// TriggerSchedule publishes schedule name's task (or flow) now, outside its ticks, and returns its
// id ("sched/<name>/now-<new id>"); the schedule's ticks do not change, and a paused schedule can
// be triggered. It fails as PauseSchedule does, and with Publish's (PublishFlow's) errors.
func (q *Queue[T]) TriggerSchedule(ctx context.Context, name string) (string, error) {
	var id string
	err := q.onSchedule(ctx, name, func(e *engine.Engine, ctx context.Context, name string) error {
		var err error
		id, err = e.TriggerSchedule(ctx, name)
		return err
	})
	return id, err
}

// DeleteSchedule deletes schedule name of q, which stops it, and reports whether it existed; the
// ticks it published stay. It fails with ErrInvalid for a nil or zero Queue, and with the
// context's or Redis's error.
func (q *Queue[T]) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if !q.made() {
		return false, errNotMade
	}
	return engine.DeleteScheduleIn(ctx, q.shards.engines, name)
}

// onSchedule runs f on the shard that holds schedule name.
func (q *Queue[T]) onSchedule(ctx context.Context, name string, f func(*engine.Engine, context.Context, string) error) error {
	if !q.made() {
		return errNotMade
	}
	in, err := engine.FindSchedule(ctx, q.shards.engines, name)
	if err != nil {
		return err
	}
	return f(in.Shard, ctx, name)
}
