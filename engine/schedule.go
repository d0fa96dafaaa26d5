package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// Schedules: periodic and cron tasks (docs/schedules.md). A schedule lives in the slot its ticks
// publish to: a task's shard, or a flow's home (its first step's shard). Its record is a hash,
// cr:<name>; crons lists every name and crondue holds the active ones by the time they are next
// due, so a firing reads only the due ones.
//
// A tick is fired under WATCH of the record: the scheduler reads the record and the server's
// time, works out the ticks due (the cron parser runs in Go), and sends the publish of the ticks'
// tasks (publish.lua) together with the record's new next time in one MULTI/EXEC. When another
// scheduler fired the schedule, or anyone changed it, between the read and EXEC, the transaction
// does nothing: a tick is published exactly when the record moves past it, once. A flow's publish
// may span slots and calls, so a flow tick is claimed in the transaction (the record keeps it as
// pending) and published after it with the tick's flow id, which makes a second publish a
// duplicate; a claim whose publisher does not finish within flowRecoverAfter is taken over.

// flowRecoverAfter is how long a flow tick may stay claimed before another scheduler publishes it.
const flowRecoverAfter = time.Minute

// MinScheduledFlowKeep is the shortest Keep of a scheduled flow: a tick's flow is published again
// when its publisher died, and its id finds it as long as it is kept.
const MinScheduledFlowKeep = time.Hour

// ErrScheduleNotFound is wrapped by the error for a schedule that does not exist. It matches
// ErrNotFound too.
var ErrScheduleNotFound error = scheduleNotFound{}

type scheduleNotFound struct{}

func (scheduleNotFound) Error() string        { return "srq: schedule not found" }
func (scheduleNotFound) Is(target error) bool { return target == ErrNotFound }

// Schedule is the HASH of schedule name's record.
func (k Keys) Schedule(name string) string { return k.base + "cr:" + name }

// Schedules is the ZSET of every schedule's name, score 0, read in name order.
func (k Keys) Schedules() string { return k.base + "crons" }

// SchedulesDue is the ZSET of the active schedules, scored by the ms at which they are next due.
func (k Keys) SchedulesDue() string { return k.base + "crondue" }

var (
	scriptScheduleDue  = mustScript("schedule_due")
	scriptScheduleList = mustScript("schedule_list")
)

// ScheduleTiming says when a schedule ticks, and what a firing does with the ticks it missed
// (srq.ScheduleOpts documents each field for users).
type ScheduleTiming struct {
	Cron     string // a cron expression, seconds optional, or a descriptor; "@every d" is Every d
	TimeZone string // the IANA zone Cron is read in; "" is UTC
	// Every is an interval; ticks are its multiples since the Unix epoch. At least
	// MinScheduleEvery; not with Cron.
	Every   time.Duration
	Jitter  time.Duration // each tick's task is delayed by a hash of the name and tick, in [0, Jitter)
	CatchUp int           // the most missed ticks a firing publishes (the latest); 0 skips them
	Grace   time.Duration // how old a tick may be and still be on time; 0 is DefaultScheduleGrace
}

// ScheduleDef is a schedule: when it ticks, and what each tick publishes.
type ScheduleDef struct {
	// Name names the schedule in its queue: at most MaxScheduleNameLen bytes of UTF-8, no '/' and
	// no control characters.
	Name string
	ScheduleTiming
	// Task is what each tick publishes: its ID and At must be unset and Wait false; its Delay
	// counts from the tick. Not with Flow.
	Task *Message
	// Flow is the flow each tick publishes, with the tick's id as its ID (which must be empty).
	// Its first step must live in the engine the schedule is put in. Its Keep must be 0 (the
	// default) or at least MinScheduledFlowKeep. Not with Task.
	Flow *FlowSpec
	// FlowHeader, when set, is a header every step of a tick's flow gets, with the flow's id.
	FlowHeader string
}

// ScheduleInfo is a schedule as stored, with its state.
type ScheduleInfo struct {
	Name string
	// ScheduleTiming is the schedule's timing, Grace with its default filled in.
	ScheduleTiming
	// Task is what each tick publishes (its ID is empty); nil for a flow schedule.
	Task *Message
	// Flow lists the steps of the flow each tick publishes; nil for a task schedule.
	Flow     []ScheduledStep
	FlowKeep time.Duration
	// Paused is set while the schedule is paused: it publishes nothing, and Next is zero.
	Paused bool
	// Next is the time of the next tick; zero while paused, or when the schedule has no tick left.
	Next time.Time
	// LastTick is the time of the last tick published; zero before the first.
	LastTick time.Time
	// LastFired is the server time at which the last tick was published.
	LastFired time.Time
	// Fired counts the ticks published; Missed the ticks skipped (after an outage longer than
	// 100,000 ticks of a cron schedule, at least that many).
	Fired, Missed int64
	// PendingFlows are the ticks whose flow is being published (or will be taken over).
	PendingFlows []time.Time
	// Created and Updated are the server times of the first and the last put.
	Created, Updated time.Time
	// Shard is the engine the schedule lives in (set by FindSchedule and ListSchedulesIn).
	Shard *Engine
	// ReadAt is the Redis server's clock when the record was read (GetSchedule, ListSchedules),
	// against which Overdue is judged; zero for a ScheduleInfo that was not read so.
	ReadAt time.Time
}

// ScheduledStep is one step of a scheduled flow, as ScheduleInfo lists it.
type ScheduledStep struct {
	Name      string
	Queue     string
	Partition partition.Key
	After     []string
}

// FiredTick is one tick FireSchedules published.
type FiredTick struct {
	Schedule string
	Tick     time.Time
	// ID is the tick's task id, or its flow id (Flow set).
	ID   string
	Flow bool
}

// MissedTicks says that a firing of schedule skipped Count ticks, which will never be published.
type MissedTicks struct {
	Schedule string
	Count    int64
}

// FireResult is what FireSchedules did.
type FireResult struct {
	Fired  []FiredTick
	Missed []MissedTicks
	// Wait is how long until the next schedule of this slot is due, by the server's clock at the
	// call; -1 when none is.
	Wait time.Duration
	// More is set when the call left due schedules for the next call.
	More bool
}

// MaxFireLimit is the most schedules one FireSchedules call fires.
const MaxFireLimit = 1000

// stored forms, as JSON in the record's "def" field.
type storedSchedule struct {
	Cron    string      `json:"cron,omitempty"`
	TZ      string      `json:"tz,omitempty"`
	Every   int64       `json:"every,omitempty"`
	Jitter  int64       `json:"jitter,omitempty"`
	CatchUp int         `json:"catchup,omitempty"`
	Grace   int64       `json:"grace,omitempty"`
	Task    *storedMsg  `json:"task,omitempty"`
	Flow    *storedFlow `json:"flow,omitempty"`
}

type storedMsg struct {
	P string            `json:"p,omitempty"`
	R int               `json:"r,omitempty"`
	D int64             `json:"d,omitempty"` // delay ms
	M int               `json:"m,omitempty"`
	H map[string]string `json:"h,omitempty"`
	B []byte            `json:"b,omitempty"`
	K int64             `json:"k,omitempty"` // outcome kept, ms
	J bool              `json:"j,omitempty"` // hold on dead
}

type storedFlow struct {
	Keep   int64        `json:"keep,omitempty"`
	Header string       `json:"header,omitempty"`
	Steps  []storedStep `json:"steps"`
}

type storedStep struct {
	Name  string      `json:"n"`
	Base  string      `json:"b"`
	Queue string      `json:"q"`
	Msg   storedMsg   `json:"m"`
	After [][2]string `json:"a,omitempty"` // parent, policy
}

func storeMsg(m *Message) storedMsg {
	return storedMsg{P: string(m.Partition), R: m.Priority, D: m.Delay.Milliseconds(), M: m.MaxAttempts,
		H: m.Headers, B: m.Payload, K: m.KeepOutcome.Milliseconds(), J: m.HoldOnDead}
}

func (s *storedMsg) message() Message {
	return Message{Partition: partition.Key(s.P), Priority: s.R, Delay: time.Duration(s.D) * time.Millisecond,
		MaxAttempts: s.M, Headers: maps.Clone(s.H), Payload: s.B, KeepOutcome: time.Duration(s.K) * time.Millisecond,
		HoldOnDead: s.J}
}

func (s *storedSchedule) timing() (timing, error) {
	return parseTiming(&ScheduleTiming{Cron: s.Cron, TimeZone: s.TZ, Every: time.Duration(s.Every) * time.Millisecond})
}

func (s *storedSchedule) grace() int64 {
	if s.Grace == 0 {
		return DefaultScheduleGrace.Milliseconds()
	}
	return s.Grace
}

// ValidateSchedule checks def as PutSchedule does, without writing anything, and returns its
// stored form. It fails with ErrInvalid.
func (e *Engine) ValidateSchedule(def *ScheduleDef) error {
	_, err := e.checkSchedule(def)
	return err
}

func (e *Engine) checkSchedule(def *ScheduleDef) (*storedSchedule, error) {
	if def == nil {
		return nil, invalidf("nil schedule")
	}
	if err := validScheduleName(def.Name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	bad := func(err error) error { return invalidIn(fmt.Sprintf("schedule %q", def.Name), err) }
	if _, err := parseTiming(&def.ScheduleTiming); err != nil {
		return nil, bad(err)
	}
	switch {
	case def.Jitter < 0 || def.Jitter > MaxDelay:
		return nil, bad(fmt.Errorf("jitter %v is outside [0, %v]", def.Jitter, MaxDelay))
	case def.CatchUp < 0 || def.CatchUp > MaxCatchUp:
		return nil, bad(fmt.Errorf("CatchUp %d is outside [0, %d]", def.CatchUp, MaxCatchUp))
	case def.Grace != 0 && (def.Grace < MinScheduleGrace || def.Grace > MaxDelay):
		return nil, bad(fmt.Errorf("grace %v is outside [%v, %v]", def.Grace, MinScheduleGrace, MaxDelay))
	case (def.Task == nil) == (def.Flow == nil):
		return nil, bad(errors.New("a schedule publishes a Task or a Flow, exactly one of them"))
	}
	every := def.Every
	cronSpec := strings.TrimSpace(def.Cron)
	if d, ok := strings.CutPrefix(cronSpec, "@every "); ok {
		every, _ = time.ParseDuration(strings.TrimSpace(d)) // parseTiming read it
		cronSpec = ""
	}
	s := &storedSchedule{Cron: cronSpec, TZ: def.TimeZone, Every: every.Milliseconds(), Jitter: def.Jitter.Milliseconds(),
		CatchUp: def.CatchUp, Grace: def.Grace.Milliseconds()}
	// The longest id a tick gets: a manual trigger's (TriggerSchedule).
	longest := triggerID(def.Name, NewID())
	if def.Task != nil {
		m := *def.Task
		switch {
		case m.ID != "":
			return nil, bad(errors.New("the task's ID is set; a tick's id is derived from the schedule and the tick"))
		case !m.At.IsZero():
			return nil, bad(errors.New("the task's At is set; a tick's task is available at the tick (after Delay)"))
		case m.Wait:
			return nil, bad(errors.New("the task's Wait is set; keep its outcome with KeepOutcome instead"))
		}
		m.ID = longest
		if err := e.validateMessage(&m); err != nil {
			return nil, bad(err)
		}
		sm := storeMsg(def.Task)
		s.Task = &sm
		return s, nil
	}
	f := def.Flow
	switch {
	case f.ID != "":
		return nil, bad(errors.New("the flow's ID is set; a tick's flow id is derived from the schedule and the tick"))
	case f.Keep != 0 && f.Keep < MinScheduledFlowKeep:
		return nil, bad(fmt.Errorf("the flow's Keep %v is under %v: a tick's flow must be kept for as long as it may be published again",
			f.Keep, MinScheduledFlowKeep))
	case len(f.Steps) > 0 && f.Steps[0].Engine != nil && f.Steps[0].Engine.keys.Base() != e.keys.Base():
		return nil, bad(fmt.Errorf("the flow's first step %q is in %s, not in this schedule's queue (shard) %s",
			f.Steps[0].Name, f.Steps[0].Engine.cfg.Queue, e.cfg.Queue))
	}
	check := *f
	check.ID = longest
	if _, err := planFlow(&check); err != nil {
		return nil, bad(err)
	}
	sf := &storedFlow{Keep: f.Keep.Milliseconds(), Header: def.FlowHeader, Steps: make([]storedStep, len(f.Steps))}
	for i := range f.Steps {
		st := &f.Steps[i]
		ss := storedStep{Name: st.Name, Base: st.Engine.keys.Base(), Queue: st.Engine.cfg.Queue, Msg: storeMsg(&st.Message)}
		for _, a := range st.After {
			ss.After = append(ss.After, [2]string{a.Parent, string(cmpPolicy(a.Policy))})
		}
		sf.Steps[i] = ss
	}
	s.Flow = sf
	return s, nil
}

func triggerID(name, unique string) string { return "sched/" + name + "/now-" + unique }

// flowOf builds the flow of a tick (or a trigger) with id from its stored form: each step on an
// engine of e's client for its slot.
func (e *Engine) flowOf(sf *storedFlow, id string, delay int64) *FlowSpec {
	spec := &FlowSpec{ID: id, Keep: time.Duration(sf.Keep) * time.Millisecond, Steps: make([]FlowStep, len(sf.Steps))}
	for i, s := range sf.Steps {
		m := s.Msg.message()
		if sf.Header != "" {
			if m.Headers == nil {
				m.Headers = map[string]string{}
			}
			m.Headers[sf.Header] = id
		}
		st := FlowStep{Name: s.Name, Engine: e.at(s.Base), Message: m}
		for _, a := range s.After {
			st.After = append(st.After, FlowEdge{Parent: a[0], Policy: EdgePolicy(a[1][0])})
		}
		if len(st.After) == 0 {
			st.Message.Delay += time.Duration(delay) * time.Millisecond
		}
		spec.Steps[i] = st
	}
	return spec
}

// schedRecord is a schedule's record as read from its hash.
type schedRecord struct {
	def     storedSchedule
	raw     string
	next    int64 // 0: no tick left
	last    int64 // the last tick published
	fired   int64 // server ms of the last publish
	nFired  int64
	nMissed int64
	paused  bool
	created int64
	updated int64
	pending []int64 // flow ticks claimed, not known to be published
	claim   int64   // server ms of the last claim of pending
}

func parseRecord(h map[string]string) (*schedRecord, error) {
	if len(h) == 0 {
		return nil, nil
	}
	r := &schedRecord{raw: h["def"], paused: h["ps"] == "1"}
	if err := json.Unmarshal([]byte(r.raw), &r.def); err != nil {
		return nil, fmt.Errorf("srq: schedule record: %w", err)
	}
	for f, p := range map[string]*int64{"n": &r.next, "l": &r.last, "lr": &r.fired, "fc": &r.nFired, "mc": &r.nMissed,
		"c": &r.created, "u": &r.updated, "fa": &r.claim} {
		if v, ok := h[f]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("srq: schedule record: field %s: %w", f, err)
			}
			*p = n
		}
	}
	if v := h["fp"]; v != "" {
		if err := json.Unmarshal([]byte(v), &r.pending); err != nil {
			return nil, fmt.Errorf("srq: schedule record: field fp: %w", err)
		}
	}
	return r, nil
}

// dueAt is the score of the record in the due index; 0: it has none (paused, or nothing to do).
func (r *schedRecord) dueAt() int64 {
	if r.paused {
		return 0
	}
	at := r.next
	if len(r.pending) > 0 {
		if c := r.claim + flowRecoverAfter.Milliseconds(); at == 0 || c < at {
			at = c
		}
	}
	return at
}

// write queues the writes that store r as schedule name's record, and its place in the indexes.
func (r *schedRecord) write(ctx context.Context, p redis.Pipeliner, k Keys, name string) {
	key := k.Schedule(name)
	p.Del(ctx, key)
	f := []any{"def", r.raw, "n", r.next, "l", r.last, "lr", r.fired, "fc", r.nFired, "mc", r.nMissed,
		"c", r.created, "u", r.updated}
	if r.paused {
		f = append(f, "ps", "1")
	}
	if len(r.pending) > 0 {
		f = append(f, "fp", mustJSON(r.pending), "fa", r.claim)
	}
	p.HSet(ctx, key, f...)
	p.ZAdd(ctx, k.Schedules(), redis.Z{Member: name})
	if at := r.dueAt(); at > 0 {
		p.ZAdd(ctx, k.SchedulesDue(), redis.Z{Score: float64(at), Member: name})
	} else {
		p.ZRem(ctx, k.SchedulesDue(), name)
	}
}

// info turns r into the ScheduleInfo of schedule name.
func (r *schedRecord) info(name string) ScheduleInfo {
	d := &r.def
	in := ScheduleInfo{Name: name, ScheduleTiming: ScheduleTiming{Cron: d.Cron, TimeZone: d.TZ,
		Every: time.Duration(d.Every) * time.Millisecond, Jitter: time.Duration(d.Jitter) * time.Millisecond,
		CatchUp: d.CatchUp, Grace: time.Duration(d.grace()) * time.Millisecond},
		Paused: r.paused, LastTick: msTime(r.last), LastFired: msTime(r.fired), Fired: r.nFired, Missed: r.nMissed,
		Created: msTime(r.created), Updated: msTime(r.updated)}
	if !r.paused {
		in.Next = msTime(r.next)
	}
	for _, t := range r.pending {
		in.PendingFlows = append(in.PendingFlows, time.UnixMilli(t))
	}
	if d.Task != nil {
		m := d.Task.message()
		in.Task = &m
	}
	if d.Flow != nil {
		in.FlowKeep = time.Duration(d.Flow.Keep) * time.Millisecond
		in.Flow = make([]ScheduledStep, len(d.Flow.Steps))
		for i, s := range d.Flow.Steps {
			st := ScheduledStep{Name: s.Name, Queue: s.Queue, Partition: partition.Key(s.Msg.P)}
			for _, a := range s.After {
				st.After = append(st.After, a[0])
			}
			in.Flow[i] = st
		}
	}
	return in
}

// errNoWrite is what a transaction's plan returns when it has nothing to write.
var errNoWrite = errors.New("no write")

// scheduleTx runs plan under WATCH of schedule name's record, with the record as read (nil when
// it does not exist) and the server's time in ms; the writes plan returns go out in one MULTI/EXEC,
// which does nothing when the record changed since the read (redis.TxFailedErr). A plan that
// returns errNoWrite ends the call without a transaction; scheduleTx then returns nil. With
// retries, a transaction that failed so is run again, at most that many times.
func (e *Engine) scheduleTx(ctx context.Context, name string, retries int,
	plan func(r *schedRecord, now int64) (func(redis.Pipeliner), error)) ([]redis.Cmder, error) {
	key := e.keys.Schedule(name)
	var cmds []redis.Cmder
	run := func(tx *redis.Tx) error {
		var rec *redis.MapStringStringCmd
		var now *redis.TimeCmd
		if _, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
			rec = p.HGetAll(ctx, key)
			now = p.Time(ctx)
			return nil
		}); err != nil {
			return err
		}
		r, err := parseRecord(rec.Val())
		if err != nil {
			return err
		}
		writes, err := plan(r, now.Val().UnixMilli())
		if err != nil {
			return err
		}
		cmds, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			writes(p)
			return nil
		})
		return err
	}
	for i := 0; ; i++ {
		err := e.client.Watch(ctx, run, key)
		switch {
		case errors.Is(err, errNoWrite):
			return nil, nil
		case errors.Is(err, redis.TxFailedErr) && i < retries:
			continue
		case err != nil:
			return cmds, err
		}
		return cmds, nil
	}
}

// PutSchedule creates schedule def.Name in e, or updates it (an upsert): an update keeps the
// schedule's state (paused or not, its last tick, counters) and, when its timing (Cron, TimeZone,
// Every) is unchanged, its next tick; a new timing starts at its first tick after now. It fails
// with ErrInvalid, before anything is written, for an invalid def (see ScheduleDef), a cron
// expression that does not parse or never fires, an unknown time zone, an interval under
// MinScheduleEvery, or a task or flow that Publish or PublishFlow would refuse; and with the
// context's or Redis's error, after which the schedule may or may not be written.
func (e *Engine) PutSchedule(ctx context.Context, def *ScheduleDef) (ScheduleInfo, error) {
	return e.putSchedule(ctx, def, nil)
}

// putSchedule is PutSchedule for a schedule that moved from another shard, whose record there was
// moved (nil: none): the schedule keeps its state (mergeMoved), and its ticks up to moved's last
// tick, published there, are not published here.
func (e *Engine) putSchedule(ctx context.Context, def *ScheduleDef, moved *schedRecord) (ScheduleInfo, error) {
	s, err := e.checkSchedule(def)
	if err != nil {
		return ScheduleInfo{}, err
	}
	t, err := s.timing()
	if err != nil {
		return ScheduleInfo{}, invalidIn(fmt.Sprintf("schedule %q", def.Name), err)
	}
	raw := mustJSON(s)
	var out ScheduleInfo
	_, err = e.scheduleTx(ctx, def.Name, 10, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
		// r is reread on every try of the transaction: merge into a copy, never into moved itself.
		var nr *schedRecord
		switch {
		case r != nil && moved != nil:
			nr = mergeMoved(r, moved) // with r's pending flow ticks: they were claimed here
		case r != nil:
			nr = r
		case moved != nil:
			m := *moved
			nr = &m
		default:
			nr = &schedRecord{created: now}
		}
		old := nr.def
		nr.def, nr.raw, nr.updated = *s, raw, now
		// A moved schedule starts after its last tick on either shard, so neither publishes a
		// tick the other did.
		if r == nil || moved != nil || nr.next == 0 || old.Cron != s.Cron || old.TZ != s.TZ || old.Every != s.Every {
			nr.next = t.next(max(now, nr.last))
		}
		out = nr.info(def.Name)
		return func(p redis.Pipeliner) { nr.write(ctx, p, e.keys, def.Name) }, nil
	})
	if err != nil {
		return ScheduleInfo{}, fmt.Errorf("srq: put schedule %q: %w", def.Name, err)
	}
	out.Shard = e
	return out, nil
}

// GetSchedule reads schedule name of e. It fails with ErrScheduleNotFound (which matches
// ErrNotFound) when e has no such schedule, and with the context's or Redis's error.
func (e *Engine) GetSchedule(ctx context.Context, name string) (ScheduleInfo, error) {
	pipe := e.client.Pipeline()
	clock := pipe.Time(ctx)
	rec := pipe.HGetAll(ctx, e.keys.Schedule(name))
	if _, err := pipe.Exec(ctx); err != nil {
		return ScheduleInfo{}, fmt.Errorf("srq: read schedule %q: %w", name, err)
	}
	h := rec.Val()
	r, err := parseRecord(h)
	if err != nil {
		return ScheduleInfo{}, err
	}
	if r == nil {
		return ScheduleInfo{}, fmt.Errorf("%w: %q in %s", ErrScheduleNotFound, name, e.cfg.Queue)
	}
	in := r.info(name)
	in.Shard, in.ReadAt = e, clock.Val().Truncate(time.Millisecond)
	return in, nil
}

// MaxSchedulePage is the most schedules one ListSchedules call returns.
const MaxSchedulePage = 1000

// ListSchedules returns up to limit (1 to MaxSchedulePage) schedules of e in name order, those
// after the name after ("" from the first): one call, O(log n + limit). It fails with ErrInvalid
// for a bad limit, and with the context's or Redis's error.
func (e *Engine) ListSchedules(ctx context.Context, after string, limit int) ([]ScheduleInfo, error) {
	if limit < 1 || limit > MaxSchedulePage {
		return nil, invalidf("limit %d is outside [1, %d]", limit, MaxSchedulePage)
	}
	res, err := e.run(ctx, scriptScheduleList, after, limit)
	if err != nil {
		return nil, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 1 {
		return nil, fmt.Errorf("srq: schedule_list: malformed reply %v", res)
	}
	now, err := replyInt(rows[0])
	if err != nil {
		return nil, fmt.Errorf("srq: schedule_list: %w", err)
	}
	out := make([]ScheduleInfo, 0, len(rows)-1)
	for _, row := range rows[1:] {
		vals, err := replySlice(row)
		if err != nil || len(vals)%2 != 1 {
			return nil, fmt.Errorf("srq: schedule_list: malformed row %v", row)
		}
		name, _ := replyString(vals[0])
		h := make(map[string]string, len(vals)/2)
		for i := 1; i+1 < len(vals); i += 2 {
			k, _ := replyString(vals[i])
			v, _ := replyString(vals[i+1])
			h[k] = v
		}
		r, err := parseRecord(h)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue // listed without a record: deleted between the two reads cannot happen in one script
		}
		in := r.info(name)
		in.Shard, in.ReadAt = e, time.UnixMilli(now)
		out = append(out, in)
	}
	return out, nil
}

// PauseSchedule pauses schedule name of e: it publishes nothing until resumed. Pausing a paused
// schedule changes nothing. It fails with ErrScheduleNotFound, and with the context's or Redis's
// error.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	return e.setSchedulePaused(ctx, name, true)
}

// ResumeSchedule resumes schedule name of e at its first tick after now: the ticks it would have
// had while paused are not published. Resuming a schedule that is not paused changes nothing. It
// fails with ErrScheduleNotFound; with ErrInvalid when this process cannot load the schedule's
// time zone; and with the context's or Redis's error.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	return e.setSchedulePaused(ctx, name, false)
}

func (e *Engine) setSchedulePaused(ctx context.Context, name string, paused bool) error {
	_, err := e.scheduleTx(ctx, name, 10, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
		if r == nil {
			return nil, fmt.Errorf("%w: %q in %s", ErrScheduleNotFound, name, e.cfg.Queue)
		}
		if r.paused == paused {
			return nil, errNoWrite
		}
		r.paused = paused
		if !paused {
			t, err := r.def.timing()
			if err != nil {
				return nil, invalidIn(fmt.Sprintf("schedule %q", name), err)
			}
			r.next = t.next(max(now, r.last))
		}
		return func(p redis.Pipeliner) { r.write(ctx, p, e.keys, name) }, nil
	})
	return err
}

// DeleteSchedule deletes schedule name of e, which stops it, and reports whether it existed. A
// tick published before stays published (its task, its flow). It fails with the context's or
// Redis's error.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	var del *redis.IntCmd
	_, err := e.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = e.deleteSchedule(ctx, p, name)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("srq: delete schedule %q: %w", name, err)
	}
	return del.Val() == 1, nil
}

// deleteSchedule queues the writes that delete schedule name; the DEL of its record reports
// whether it existed.
func (e *Engine) deleteSchedule(ctx context.Context, p redis.Pipeliner, name string) *redis.IntCmd {
	del := p.Del(ctx, e.keys.Schedule(name))
	p.ZRem(ctx, e.keys.Schedules(), name)
	p.ZRem(ctx, e.keys.SchedulesDue(), name)
	return del
}

// TriggerSchedule publishes schedule name's task (or flow) now, outside its ticks, with the id
// "sched/<name>/now-<new id>", and returns that id. The schedule's ticks and state do not change;
// a paused schedule can be triggered. It fails with ErrScheduleNotFound, and with the context's
// or Redis's error (PublishFlow's for a flow), after which the task may or may not exist.
func (e *Engine) TriggerSchedule(ctx context.Context, name string) (string, error) {
	h, err := e.client.HGetAll(ctx, e.keys.Schedule(name)).Result()
	if err != nil {
		return "", fmt.Errorf("srq: read schedule %q: %w", name, err)
	}
	r, err := parseRecord(h)
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", fmt.Errorf("%w: %q in %s", ErrScheduleNotFound, name, e.cfg.Queue)
	}
	id := triggerID(name, NewID())
	if r.def.Flow != nil {
		if _, err := PublishFlow(ctx, e.flowOf(r.def.Flow, id, 0)); err != nil {
			return "", err
		}
		return id, nil
	}
	m := r.def.Task.message()
	m.ID = id
	if _, err := e.Publish(ctx, []Message{m}); err != nil {
		return "", err
	}
	return id, nil
}

// FireSchedules publishes the due ticks of e's schedules, at most limit schedules (1 to
// MaxFireLimit) a call: the ones due by the server's clock, read from the due index, in random
// order so that schedulers running at once start on different ones. Any number of schedulers may
// call it at once: each tick is published once (see the top of this file). A schedule whose
// firing failed (Redis's error, or a time zone this process cannot load) is left due for the next
// call; the other schedules are fired, and the errors returned joined. It fails with ErrInvalid
// for a bad limit, and with the context's or Redis's error.
func (e *Engine) FireSchedules(ctx context.Context, limit int) (FireResult, error) {
	if limit < 1 || limit > MaxFireLimit {
		return FireResult{}, invalidf("limit %d is outside [1, %d]", limit, MaxFireLimit)
	}
	res, err := e.run(ctx, scriptScheduleDue, limit)
	if err != nil {
		return FireResult{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 2 {
		return FireResult{}, fmt.Errorf("srq: schedule_due: malformed reply %v", res)
	}
	now, _ := replyInt(rows[0])
	later, _ := replyInt(rows[1])
	names := make([]string, 0, len(rows)-2)
	for _, v := range rows[2:] {
		s, _ := replyString(v)
		names = append(names, s)
	}
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	out := FireResult{More: len(names) == limit}
	next := later
	var errs []error
	for _, name := range names {
		f, err := e.fireSchedule(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("srq: fire schedule %q: %w", name, err))
			continue
		}
		out.Fired = append(out.Fired, f.fired...)
		if f.missed > 0 {
			out.Missed = append(out.Missed, MissedTicks{Schedule: name, Count: f.missed})
		}
		if f.due > 0 && (next < 0 || f.due < next) {
			next = f.due
		}
	}
	out.Wait = -1
	if next >= 0 {
		out.Wait = time.Duration(max(next-now, 0)) * time.Millisecond
	}
	return out, errors.Join(errs...)
}

// firing is what fireSchedule did with one schedule.
type firing struct {
	fired  []FiredTick
	missed int64
	due    int64 // when the schedule is due next; 0: not
}

// fireSchedule fires schedule name if it is due: see the top of this file.
func (e *Engine) fireSchedule(ctx context.Context, name string) (firing, error) {
	var f firing
	var args []any      // publish.lua's arguments, for a task schedule
	var flows []int64   // the flow ticks this call claimed, to publish after the transaction
	var def *storedFlow // their flow
	var jit time.Duration
	cmds, err := e.scheduleTx(ctx, name, 2, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
		f, args, flows, def = firing{}, nil, nil, nil
		if r == nil || r.paused {
			// Deleted or paused since the due index was read: its entry went with that.
			return nil, errNoWrite
		}
		stale := len(r.pending) > 0 && now >= r.claim+flowRecoverAfter.Milliseconds()
		if (r.next == 0 || r.next > now) && !stale {
			f.due = r.dueAt() // fired by another scheduler meanwhile
			return nil, errNoWrite
		}
		if r.next != 0 && r.next <= now {
			t, err := r.def.timing()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			d := t.due(r.next, now, r.def.grace(), r.def.CatchUp)
			f.missed = d.missed
			for _, tick := range d.fire {
				id := tickID(name, tick)
				f.fired = append(f.fired, FiredTick{Schedule: name, Tick: time.UnixMilli(tick), ID: id, Flow: r.def.Flow != nil})
				if r.def.Task != nil {
					m := r.def.Task.message()
					m.At = time.UnixMilli(tick + jitter(name, tick, time.Duration(r.def.Jitter)*time.Millisecond)).Add(m.Delay)
					m.Delay = 0
					args, _ = messageArgs(args, id, &m)
				} else {
					flows = append(flows, tick)
				}
			}
			r.next = d.next
			if len(d.fire) > 0 {
				r.last, r.fired = d.fire[len(d.fire)-1], now
			}
			r.nFired += int64(len(d.fire))
			r.nMissed += d.missed
		}
		if stale {
			// Their publisher did not finish in time: this call publishes them, as its own.
			flows = append(slices.Clone(r.pending), flows...)
			r.pending = nil
		}
		if len(flows) > 0 {
			def, jit = r.def.Flow, time.Duration(r.def.Jitter)*time.Millisecond
			r.pending = append(r.pending, flows...)
			r.claim = now
		}
		f.due = r.dueAt()
		return func(p redis.Pipeliner) {
			if len(args) > 0 {
				cmd, _ := e.command(ctx, scriptPublish, false, tickBatches(args))
				_ = p.Process(ctx, cmd) // its error is cmd's, read after EXEC
			}
			r.write(ctx, p, e.keys, name)
		}, nil
	})
	if errors.Is(err, redis.TxFailedErr) {
		return firing{}, nil // another scheduler changed it: it fired, or the schedule was changed
	}
	var published any
	if len(args) > 0 && len(cmds) > 0 {
		published = cmds[0].(*redis.Cmd).Val()
		if isNoScript(cmds[0].Err()) {
			// EXEC ran the record's update, but the server did not know publish.lua: publish the
			// ticks now. No other scheduler publishes them: the record has moved past them.
			if published, err = e.run(ctx, scriptPublish, tickBatches(args)...); err != nil {
				return f, fmt.Errorf("publish the ticks %v after a NOSCRIPT: %w", f.fired, err)
			}
		}
	}
	if err != nil {
		return firing{}, err
	}
	if published != nil {
		// A tick refused by the priority cap of its partition (ErrTooManyPriorities) is missed.
		codes, err := replyCodes(published, len(f.fired))
		if err != nil {
			return f, err
		}
		var refused []FiredTick
		f.fired = slices.DeleteFunc(f.fired, func(t FiredTick) bool {
			c := codes[0]
			codes = codes[1:]
			if c == codeLevels || c == codeRefused {
				refused = append(refused, t)
				return true
			}
			return false
		})
		if len(refused) > 0 {
			f.missed += int64(len(refused))
			return f, fmt.Errorf("ticks %v: %w", refused, ErrTooManyPriorities)
		}
	}
	if len(flows) > 0 {
		if err := e.publishFlowTicks(ctx, name, def, jit, flows); err != nil {
			return f, err
		}
	}
	return f, nil
}

// tickBatches returns publish.lua's arguments for the messages in args (publishArgs values each),
// each message a batch of its own: a tick the priority cap refuses does not take the others along.
func tickBatches(args []any) []any {
	n := len(args) / publishArgs
	out := make([]any, 0, 2+n+len(args))
	out = append(out, 0, n)
	for range n {
		out = append(out, 1)
	}
	return append(out, args...)
}

// publishFlowTicks publishes the flows of ticks of schedule name, then takes them off the
// record's pending list. A flow that exists already (published by a scheduler that died before
// it took it off) is not published again: its id makes the publish a duplicate.
func (e *Engine) publishFlowTicks(ctx context.Context, name string, def *storedFlow, jit time.Duration, ticks []int64) error {
	var errs []error
	var done []int64
	for _, tick := range ticks {
		spec := e.flowOf(def, tickID(name, tick), jitter(name, tick, jit))
		// A flow that exists is a duplicate, or a conflict while one of its steps' tasks exists:
		// either way it was published.
		if _, err := PublishFlow(ctx, spec); err != nil && !errors.Is(err, ErrFlowConflict) {
			errs = append(errs, fmt.Errorf("publish the flow of tick %d: %w", tick, err))
			continue
		}
		done = append(done, tick)
	}
	if len(done) > 0 {
		_, err := e.scheduleTx(ctx, name, 10, func(r *schedRecord, now int64) (func(redis.Pipeliner), error) {
			if r == nil {
				return nil, errNoWrite
			}
			left := slices.DeleteFunc(r.pending, func(t int64) bool { return slices.Contains(done, t) })
			if len(left) == len(r.pending) {
				return nil, errNoWrite
			}
			r.pending = left
			return func(p redis.Pipeliner) { r.write(ctx, p, e.keys, name) }, nil
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
