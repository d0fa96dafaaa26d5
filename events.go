package srq

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
)

// EventKind is what an Event reports; the kinds are engine.EventPublished and its siblings.
type EventKind = engine.EventKind

// Event is one change of a queue as its event stream reports it (QueueConfig.Events): what
// happened (Kind) to which task or flow (ID), when on the Redis server's clock, and its details.
type Event struct {
	engine.Event
	// Shard is the shard whose stream holds the event; 0 on a queue of one shard.
	Shard int
	// Cursor resumes reading right after this event: pass it to Events as from, and the events
	// come that follow this one, on every shard. It holds one stream id ("<ms>-<n>") per shard,
	// joined by commas: this event's on its shard, and on the others the last one read before
	// this event was yielded (on a shard with none read yet, its newest event when reading
	// started from "", or "0-0" from "0").
	Cursor string
}

// eventsRead is the most events one read of a shard's stream returns.
const eventsRead = 100

// Events returns an iterator over q's events, oldest first, from from: "" for those written from
// now on (after the newest event each shard's stream holds when the iteration starts), "0" for the
// oldest the stream keeps, or an Event's Cursor to resume right after it (as after a restart of
// the reader), on a sharded queue too. It waits in Redis for new events, and ends when ctx does or the
// loop breaks. A failed read yields its error with a zero Event; the iteration goes on, resuming
// where it was, after a pause (up to 5s, growing), unless the loop breaks: a reader rides out a
// disconnect or a Redis restart without a gap, as far as the stream kept the events (it keeps
// about QueueConfig.Events of them; with AOF persistence they survive a restart). A queue
// without an event stream yields nothing. An invalid from yields an error wrapping ErrInvalid,
// then ends. Events of a sharded queue come from every shard's stream, in order per shard.
func (q *Queue[T]) Events(ctx context.Context, from string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if !q.made() {
			yield(Event{}, errNotMade)
			return
		}
		engs := q.shards.engines
		pos, err := startPositions(from, len(engs))
		if err != nil {
			yield(Event{}, err)
			return
		}
		pause := time.Duration(0)
		turn := 0
		for ctx.Err() == nil {
			// Every shard's "$" becomes the position of its newest event before any shard is
			// read, so that "from now on" means the same moment on every shard and no Cursor
			// carries a "$".
			resolved := true
			for i, eng := range engs {
				if pos[i] != "$" {
					continue
				}
				last, err := lastEvent(ctx, eng)
				if err != nil {
					if ctx.Err() != nil || !failed(ctx, yield, err, &pause) {
						return
					}
					resolved = false
					break
				}
				pos[i] = last
			}
			if !resolved {
				continue
			}
			got := false
			for i, eng := range engs {
				// Wait in Redis only on one shard a round, and only when the others had nothing.
				var block time.Duration
				if i == turn%len(engs) && !got {
					block = time.Second / time.Duration(len(engs))
				}
				evs, err := eng.Events(ctx, pos[i], eventsRead, block)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if !failed(ctx, yield, err, &pause) {
						return
					}
					continue
				}
				pause = 0
				for _, ev := range evs {
					got = true
					pos[i] = ev.Position
					if !yield(Event{Event: ev, Shard: i, Cursor: strings.Join(pos, ",")}, nil) {
						return
					}
				}
			}
			turn++
		}
	}
}

// startPositions parses from into one stream position per shard ("$": the last event, read first).
func startPositions(from string, shards int) ([]string, error) {
	pos := make([]string, shards)
	switch from {
	case "", "$":
		for i := range pos {
			pos[i] = "$"
		}
		return pos, nil
	case "0":
		for i := range pos {
			pos[i] = "0-0" // a stream id, as a Cursor's every position must be
		}
		return pos, nil
	}
	parts := strings.Split(from, ",")
	if len(parts) != shards {
		return nil, fmt.Errorf("%w: event cursor %q has %d positions, the queue has %d shards", ErrInvalid, from, len(parts), shards)
	}
	for i, p := range parts {
		ms, n, ok := strings.Cut(p, "-")
		if !ok || !digits(ms) || !digits(n) {
			return nil, fmt.Errorf("%w: event cursor %q: position %q is not a stream id", ErrInvalid, from, p)
		}
		pos[i] = p
	}
	return pos, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// lastEvent returns the position of the newest event of eng's stream, "0-0" when it has none.
func lastEvent(ctx context.Context, eng *engine.Engine) (string, error) {
	ms, err := eng.Client().XRevRangeN(ctx, eng.Keys().Events(), "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("srq: read events of %s: %w", eng.Config().Queue, err)
	}
	if len(ms) == 0 {
		return "0-0", nil
	}
	return ms[0].ID, nil
}

// failed yields err and, unless the loop broke, pauses before the next try, longer each time up
// to 5s. It reports whether the iteration goes on.
func failed(ctx context.Context, yield func(Event, error) bool, err error, pause *time.Duration) bool {
	if !yield(Event{}, err) {
		return false
	}
	*pause = min(max(2**pause, 50*time.Millisecond), 5*time.Second)
	t := time.NewTimer(*pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
