package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// EventKind is what an Event reports.
type EventKind string

// The kinds of events, each written in the same script call as the change it reports.
const (
	EventPublished     EventKind = "published"      // a task was added (Partition set)
	EventAcked         EventKind = "acked"          // a task succeeded
	EventRetried       EventKind = "retried"        // a task went back after a failure (Error, Delay)
	EventRecovered     EventKind = "recovered"      // a task whose lease expired went back
	EventHandedBack    EventKind = "handed_back"    // a worker returned a task unrun, or cut off by its shutdown (no attempt used)
	EventDead          EventKind = "dead"           // a task was dead-lettered (Error)
	EventCancelled     EventKind = "cancelled"      // a task was cancelled (Error: why)
	EventRequeued      EventKind = "requeued"       // a dead letter went back to pending
	EventPurged        EventKind = "purged"         // a dead letter was deleted (purged or trimmed)
	EventReleased      EventKind = "released"       // a flow step's parents were done, or its flow was published (a first step): it is pending (Partition set)
	EventFlowStarted   EventKind = "flow_started"   // a flow whose home is this queue was published (ID is the flow's)
	EventFlowCompleted EventKind = "flow_completed" // every step of the flow succeeded
	EventFlowFailed    EventKind = "flow_failed"    // a step of the flow failed or was cancelled (Step)
	EventFlowRunning   EventKind = "flow_running"   // a failed flow runs again: its failed step was requeued (Step)
	EventWaiting       EventKind = "waiting"        // a task parked until its children end or a signal comes (Detail: "c", or "s" and the signal's name)
	EventResumed       EventKind = "resumed"        // a parked task is pending again (Partition set)
	EventSignal        EventKind = "signal"         // a signal was sent to a task: it resumed, or keeps it (Detail: the signal's name)
	EventProgress      EventKind = "progress"       // a running task reported its progress (Detail: the value, encoded by its queue's codec)
)

// Event is one entry of a queue's event stream (Config.Events).
type Event struct {
	// Position is the entry's id in the stream ("<ms>-<n>"): read on from it with Events.
	Position string
	// Time is when the change happened, on the Redis server's clock.
	Time time.Time
	Kind EventKind
	// ID is the task's id, or the flow's for the flow events.
	ID        string
	Partition string
	Error     string
	Delay     time.Duration
	Step      string
	// Detail is what the kind carries besides: EventWaiting's wait, EventSignal's name,
	// EventProgress's value.
	Detail string
}

// eventsStream is the key of the queue's event stream.
func (k Keys) Events() string { return k.base + "ev" }

// eventsCap is where an engine that keeps an event stream records its cap, so a relay of another
// process that applies flow messages here (flow_apply.lua) writes events too.
func (k Keys) eventsCap() string { return k.base + "evcap" }

// argBase is the first script argument: the key base, followed by the event stream's cap when
// the queue keeps one (lua/includes/common.lua).
func argBase(base string, events int) string {
	if events <= 0 {
		return base
	}
	return base + strconv.Itoa(events)
}

// AnnounceEvents records in Redis that the queue keeps an event stream of Config.Events entries,
// so relays of other processes that apply flow messages to this queue write its events too. A queue without a stream records nothing. It fails with the context's or Redis's error.
func (e *Engine) AnnounceEvents(ctx context.Context) error {
	if e.cfg.Events <= 0 {
		return nil
	}
	if err := e.client.Set(ctx, e.keys.eventsCap(), e.cfg.Events, 0).Err(); err != nil {
		return fmt.Errorf("srq: announce events of %s: %w", e.cfg.Queue, err)
	}
	return nil
}

// MaxEventsRead is the most events one Events call returns.
const MaxEventsRead = 10_000

// Events reads up to count events of the queue's stream after position after ("" or "0": from the
// oldest kept; "$": only events written from now on), waiting up to block for the first one when
// there is none (0: no wait; at most MaxBlock a call). It returns them oldest first, none when
// the wait passed. It fails with ErrInvalid for a count outside [1, MaxEventsRead], and with the
// context's or Redis's error.
func (e *Engine) Events(ctx context.Context, after string, count int, block time.Duration) ([]Event, error) {
	if count < 1 || count > MaxEventsRead {
		return nil, invalidf("event count %d is outside [1, %d]", count, MaxEventsRead)
	}
	if after == "" {
		after = "0"
	}
	args := &redis.XReadArgs{Streams: []string{e.keys.Events(), after}, Count: int64(count), Block: -1}
	if block > 0 {
		args.Block = min(block, e.cfg.MaxBlock)
		if e.shortBlockCap > 0 {
			args.Block = min(args.Block, e.shortBlockCap)
		}
	}
	streams, err := e.client.XRead(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("srq: read events of %s: %w", e.cfg.Queue, err)
	}
	var out []Event
	for _, s := range streams {
		for _, m := range s.Messages {
			out = append(out, parseEvent(m))
		}
	}
	return out, nil
}

// parseEvent reads one stream entry.
func parseEvent(m redis.XMessage) Event {
	ev := Event{Position: m.ID}
	if ms, _, ok := strings.Cut(m.ID, "-"); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			ev.Time = time.UnixMilli(n)
		}
	}
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	ev.Kind, ev.ID, ev.Partition, ev.Error, ev.Step = EventKind(str("k")), str("id"), str("p"), str("e"), str("s")
	ev.Detail = str("v")
	if d, err := strconv.ParseInt(str("d"), 10, 64); err == nil {
		ev.Delay = time.Duration(d) * time.Millisecond
	}
	return ev
}
