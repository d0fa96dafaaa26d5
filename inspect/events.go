package inspect

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/payload"
)

// Event positions that start a listing rather than continue one (EventQuery.After).
const (
	// EventsFromOldest starts at the oldest event the stream keeps.
	EventsFromOldest = ""
	// EventsFromNow starts after the newest event: only those written from now on.
	EventsFromNow = "$"
)

// EventQuery selects events of a queue's event stream (srq.QueueConfig.Events).
type EventQuery struct {
	// After is where to start: EventsFromOldest, EventsFromNow, an EventPage.Next, or an
	// srq.Event's Cursor (the same format: one stream position per shard, joined by commas).
	After string
	// Last lists the newest Limit events instead, ignoring After.
	Last bool
	// Limit is the most events returned. Default 50; at most MaxLimit.
	Limit int
	// Wait is how long to wait in Redis for an event when none follows After (not with Last):
	// each shard in turn for its share, at most the engine's MaxBlock (1s) a shard. Zero: no wait.
	Wait time.Duration
}

// Event is one change of a queue as its event stream reports it.
type Event struct {
	// Position is the event's id in its shard's stream ("<ms>-<n>").
	Position string    `json:"position"`
	Shard    int       `json:"shard"`
	Time     time.Time `json:"time"` // when it happened, on the Redis server's clock
	// Kind is what happened: published, acked, retried, recovered, handed_back, dead, cancelled,
	// requeued, purged, released, flow_started, flow_completed, flow_failed, flow_running, or, for
	// dynamic workflows, waiting (a task parked until its children end or a signal comes), resumed
	// (a parked task is pending again), signal (a signal was sent to a task) and progress (a
	// running task reported its progress).
	Kind string `json:"kind"`
	// ID is the task's id, or the flow's for the flow events.
	ID        string `json:"id"`
	Partition string `json:"partition"`
	Error     string `json:"error"`
	DelayMS   int64  `json:"delay_ms"` // a retry's delay, in milliseconds
	Step      string `json:"step"`     // the step a flow_failed or flow_running event is about
	// Wait is what a waiting task waits for: WaitForChildren or WaitForSignal; "" for the other
	// kinds.
	Wait string `json:"wait"`
	// Signal is the name of the signal a waiting task waits for, or of the signal a signal event
	// sent.
	Signal string `json:"signal"`
	// Progress is the value a progress event reported, as JSON: a JSON value as it is, a msgpack
	// one (the default codec's) decoded, anything else as a JSON string of its bytes (a byte that
	// is not UTF-8 as U+FFFD); null for the other kinds.
	Progress JSONValue `json:"progress"`
}

// JSONValue is the text of one JSON value, written into JSON as that value (not as a string),
// and read back from any JSON value; "" is null. Unlike json.RawMessage it is comparable, so an
// Event is too.
type JSONValue string

// MarshalJSON returns v's text, or null for "". The encoder fails on text that is not JSON.
func (v JSONValue) MarshalJSON() ([]byte, error) {
	if v == "" {
		return []byte("null"), nil
	}
	return []byte(v), nil
}

// UnmarshalJSON keeps the text of the JSON value b, "" for null. It never fails: the decoder
// gives it one valid value.
func (v *JSONValue) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = ""
		return nil
	}
	*v = JSONValue(b)
	return nil
}

// EventPage is one page of events, oldest first.
type EventPage struct {
	Events []Event `json:"events"`
	// Next continues after the last event of the page (EventQuery.After); with no events, it is
	// where the listing stands, to wait for the next ones from.
	Next string `json:"next"`
	// Stream says whether the queue keeps an event stream: false means no event is written (set
	// srq.QueueConfig.Events), so none will come.
	Stream bool `json:"stream"`
}

// Events returns one page of queue's events, oldest first: the Limit after q.After (waiting up to
// q.Wait for the first one when there is none), or the newest Limit with q.Last. On a sharded
// queue each shard's stream is read and the events merged by time, a shard's own in their order;
// Next holds a position per shard. It costs O(shards · (log n + limit)). It fails with
// engine.ErrInvalid for a malformed After or one of another shard count, or a limit above
// MaxLimit, with engine.ErrNotFound for an unknown queue, and with the context's or Redis's error.
func (in *Inspector) Events(ctx context.Context, queue string, q EventQuery) (EventPage, error) {
	limit := cmp.Or(q.Limit, DefaultPageLimit)
	if limit < 1 || limit > MaxLimit || q.Wait < 0 {
		return EventPage{}, fmt.Errorf("inspect: %w: event limit %d (at most %d) or wait %v", engine.ErrInvalid, limit, MaxLimit, q.Wait)
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return EventPage{}, err
	}
	var pos []string
	if !q.Last {
		if pos, err = parseEventCursor(q.After, len(engs)); err != nil {
			return EventPage{}, err
		}
	}
	page := EventPage{}
	per := make([][]Event, len(engs))
	next := make([]string, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		if i == 0 {
			n, err := engine.AnnouncedEvents(ctx, in.client, e.Keys())
			if err != nil {
				return err
			}
			page.Stream = n > 0
		}
		var evs []engine.Event
		var err error
		switch {
		case q.Last:
			evs, err = e.LastEvents(ctx, limit)
			next[i] = "0-0"
		case pos[i] == EventsFromNow:
			// Only where the stream stands: the events after it are for the next call.
			last, err := e.LastEvents(ctx, 1)
			next[i] = "0-0"
			if len(last) > 0 {
				next[i] = last[0].Position
			}
			return err
		default:
			evs, err = e.Events(ctx, pos[i], limit, 0)
			next[i] = pos[i]
		}
		for _, ev := range evs {
			per[i] = append(per[i], eventOf(ev, i))
		}
		return err
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("inspect: events of %q: %w", queue, err)
	}
	all := slices.Concat(per...)
	if len(all) == 0 && q.Wait > 0 && !q.Last {
		// Nothing yet: wait on each shard in turn for its share of the wait, until one has some.
		for i, e := range engs {
			evs, err := e.Events(ctx, next[i], limit, max(q.Wait/time.Duration(len(engs)), time.Millisecond))
			if err != nil {
				return EventPage{}, fmt.Errorf("inspect: events of %q: %w", queue, err)
			}
			for _, ev := range evs {
				all = append(all, eventOf(ev, i))
			}
			if len(all) > 0 {
				break
			}
		}
	}
	slices.SortStableFunc(all, func(a, b Event) int { return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Shard, b.Shard)) })
	if q.Last {
		all = all[max(0, len(all)-limit):]
		// The next events of each shard follow its newest, shown or not.
		for _, evs := range per {
			if len(evs) > 0 {
				next[evs[0].Shard] = evs[len(evs)-1].Position
			}
		}
	} else {
		all = all[:min(len(all), limit)]
		for _, ev := range all {
			next[ev.Shard] = ev.Position
		}
	}
	page.Events, page.Next = all, strings.Join(next, ",")
	if page.Events == nil {
		page.Events = []Event{}
	}
	return page, nil
}

// eventOf turns an event of shard i's stream into an Event, its Detail into Wait, Signal or
// Progress by its kind.
func eventOf(ev engine.Event, shard int) Event {
	out := Event{Position: ev.Position, Shard: shard, Time: ev.Time, Kind: string(ev.Kind), ID: ev.ID,
		Partition: ev.Partition, Error: ev.Error, DelayMS: ev.Delay.Milliseconds(), Step: ev.Step}
	switch ev.Kind {
	case engine.EventWaiting:
		switch {
		case ev.Detail == string(engine.WaitChildren):
			out.Wait = WaitForChildren
		case strings.HasPrefix(ev.Detail, string(engine.WaitSignal)):
			out.Wait, out.Signal = WaitForSignal, ev.Detail[1:]
		}
	case engine.EventSignal:
		out.Signal = ev.Detail
	case engine.EventProgress:
		out.Progress = progressJSON([]byte(ev.Detail))
	}
	return out
}

// progressJSON is a progress value as JSON (Event.Progress).
func progressJSON(v []byte) JSONValue {
	switch format, js := payload.Decode(v); format {
	case payload.FormatJSON, payload.FormatMsgpack:
		return JSONValue(js)
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)  // as payload.Decode writes JSON: "<" stays "<"
	_ = enc.Encode(string(v)) // a string always encodes
	return JSONValue(bytes.TrimSuffix(js.Bytes(), []byte("\n")))
}

// parseEventCursor reads an EventQuery.After into a stream position per shard: "0" for the
// oldest, "$" for the newest, or the positions it holds.
func parseEventCursor(after string, shards int) ([]string, error) {
	pos := make([]string, shards)
	switch after {
	case EventsFromOldest, EventsFromNow:
		for i := range pos {
			pos[i] = cmp.Or(after, "0")
		}
		return pos, nil
	}
	parts := strings.Split(after, ",")
	if len(parts) != shards {
		return nil, fmt.Errorf("inspect: %w: event cursor %q has %d positions, the queue has %d shards",
			engine.ErrInvalid, after, len(parts), shards)
	}
	for i, p := range parts {
		if !streamID(p) {
			return nil, fmt.Errorf("inspect: %w: event cursor %q: %q is not a stream position (<ms>-<n>)", engine.ErrInvalid, after, p)
		}
		pos[i] = p
	}
	return pos, nil
}

// streamID reports whether s is a stream entry id "<ms>-<n>", or "0".
func streamID(s string) bool {
	ms, n, ok := strings.Cut(s, "-")
	if !ok {
		return s == "0"
	}
	return digits(ms) && digits(n)
}

func digits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
