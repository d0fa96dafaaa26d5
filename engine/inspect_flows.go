package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// The reads of this file serve the operator views (package inspect) with what Overview and
// PartitionsBy do not return: the flows whose home is the queue, the counters of flows, waiting
// steps and cancellations, the partitions held by a dead letter with the time they were held, and
// the event stream's newest entries. They are plain reads (no script), each one round trip except
// FlowsPage (two), and cost O(log n + page size).

// Flows is the ZSET of the running flows whose home is the queue, scored by the ms they were
// published (lua/includes/flow.lua).
func (k Keys) Flows() string { return k.base + "flows" }

// FlowsEnded is the ZSET of the ended flows whose home is the queue, scored by the ms their
// retention ends (lua/includes/flow.lua).
func (k Keys) FlowsEnded() string { return k.base + "flowsx" }

// Flow is the HASH of flow fid's record at its home (lua/includes/flow.lua).
func (k Keys) Flow(fid string) string { return k.base + "f:" + fid }

// Halted is the ZSET of the ordered partitions held by a dead letter, scored by the ms they were
// held (lua/includes/common.lua).
func (k Keys) Halted() string { return k.base + "halted" }

// FlowList names an index of the flows whose home is a queue, for FlowsPage.
type FlowList string

// The flow indexes.
const (
	// FlowsRunning lists the flows with steps still to run (a failed flow whose other steps still
	// run is one), newest first.
	FlowsRunning FlowList = "running"
	// FlowsEnded lists the flows whose steps all ended, kept for their retention, the latest
	// retention end first (which, for flows of one Keep, is the latest ended first).
	FlowsEnded FlowList = "ended"
)

// FlowSummary is a flow as a list shows it, read from its record at its home.
type FlowSummary struct {
	ID    string
	State FlowState
	// Created is when the flow was published; Ended when every step had ended (zero before).
	Created, Ended time.Time
	// Keep is how long the flow is kept after it ended: an ended flow is listed until Ended+Keep.
	Keep time.Duration
	// Steps counts the flow's steps; Succeeded those that succeeded, Failed those that failed or
	// were cancelled.
	Steps, Succeeded, Failed int
}

// FlowsPage returns up to limit flows of list whose home is e, skipping offset of them, and how
// many the list holds. A flow forgotten between the two reads (its retention ended) is left out,
// so a page may be short. It costs two round trips, O(log n + offset + limit). It fails with
// ErrInvalid for an unknown list, a negative offset, a limit outside [1, MaxInspectPage] or
// offset+limit above MaxInspectPage, and with the context's or Redis's error.
func (e *Engine) FlowsPage(ctx context.Context, list FlowList, offset, limit int) ([]FlowSummary, int64, error) {
	key := e.keys.Flows()
	switch list {
	case FlowsRunning:
	case FlowsEnded:
		key = e.keys.FlowsEnded()
	default:
		return nil, 0, invalidf("unknown flow list %q", string(list))
	}
	if offset < 0 || limit < 1 || limit > MaxInspectPage || offset > MaxInspectPage-limit {
		return nil, 0, invalidf("flow page offset %d limit %d (offset+limit at most %d)", offset, limit, MaxInspectPage)
	}
	pipe := e.client.Pipeline()
	idsCmd := pipe.ZRevRange(ctx, key, int64(offset), int64(offset+limit-1))
	total := pipe.ZCard(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("srq: flows of %s: %w", e.cfg.Queue, err)
	}
	ids := idsCmd.Val()
	if len(ids) == 0 {
		return []FlowSummary{}, total.Val(), nil
	}
	pipe = e.client.Pipeline()
	recs := make([]*redis.MapStringStringCmd, len(ids))
	for i, fid := range ids {
		recs[i] = pipe.HGetAll(ctx, e.keys.Flow(fid))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("srq: flows of %s: %w", e.cfg.Queue, err)
	}
	out := make([]FlowSummary, 0, len(ids))
	for i, fid := range ids {
		r := recs[i].Val()
		if len(r) == 0 {
			continue
		}
		out = append(out, FlowSummary{ID: fid, State: flowStates[r["S"]], Created: msTime(atoi64(r["c"])),
			Ended: msTime(atoi64(r["e"])), Keep: time.Duration(atoi64(r["k"])) * time.Millisecond,
			Steps: int(atoi64(r["n"])), Succeeded: int(atoi64(r["ok"])), Failed: int(atoi64(r["bad"]))})
	}
	return out, total.Val(), nil
}

// ExtraStats are the counts of a queue that Overview does not return: the counters of its flow
// steps, cancellations and flows, and the sizes of its flow and hold indexes.
type ExtraStats struct {
	// Waiting is the flow steps waiting for their parents; Cancelled counts the tasks cancelled
	// since the queue was created.
	Waiting, Cancelled int64
	// FlowsStarted, FlowsCompleted and FlowsFailed count the flows whose home is the queue that
	// were published, that completed and that failed (Stats).
	FlowsStarted, FlowsCompleted, FlowsFailed int64
	// FlowsRunning and FlowsEnded are the sizes of the two flow lists (FlowsPage).
	FlowsRunning, FlowsEnded int64
	// HeldPartitions counts the ordered partitions held by a dead letter.
	HeldPartitions int64
}

// ExtraStats reads the queue's ExtraStats in one round trip. It fails with the context's or
// Redis's error.
func (e *Engine) ExtraStats(ctx context.Context) (ExtraStats, error) {
	pipe := e.client.Pipeline()
	counters := pipe.HMGet(ctx, e.keys.Stats(), "waiting", "cancelled", "flows_started", "flows_completed", "flows_failed")
	running := pipe.ZCard(ctx, e.keys.Flows())
	ended := pipe.ZCard(ctx, e.keys.FlowsEnded())
	held := pipe.ZCard(ctx, e.keys.Halted())
	if _, err := pipe.Exec(ctx); err != nil {
		return ExtraStats{}, fmt.Errorf("srq: stats of %s: %w", e.cfg.Queue, err)
	}
	s := ExtraStats{FlowsRunning: running.Val(), FlowsEnded: ended.Val(), HeldPartitions: held.Val()}
	for i, p := range []*int64{&s.Waiting, &s.Cancelled, &s.FlowsStarted, &s.FlowsCompleted, &s.FlowsFailed} {
		v, _ := counters.Val()[i].(string)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ExtraStats{}, fmt.Errorf("srq: stats of %s: malformed counter %q", e.cfg.Queue, v)
		}
		*p = n
	}
	return s, nil
}

// HeldPartition is an ordered partition held by a dead letter (see IndexHeld), with when it was
// held.
type HeldPartition struct {
	Key   partition.Key
	Since time.Time
}

// HeldPartitions returns the first limit partitions held by a dead letter, longest held first,
// and how many are held, in one round trip; PartitionInfo (Partitions) names the dead letter. It
// fails with ErrInvalid for a limit outside [1, MaxInspectPage], and with the context's or
// Redis's error.
func (e *Engine) HeldPartitions(ctx context.Context, limit int) ([]HeldPartition, int64, error) {
	if limit < 1 || limit > MaxInspectPage {
		return nil, 0, invalidf("partition limit %d is outside [1, %d]", limit, MaxInspectPage)
	}
	pipe := e.client.Pipeline()
	rows := pipe.ZRangeWithScores(ctx, e.keys.Halted(), 0, int64(limit-1))
	total := pipe.ZCard(ctx, e.keys.Halted())
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("srq: held partitions of %s: %w", e.cfg.Queue, err)
	}
	out := make([]HeldPartition, 0, len(rows.Val()))
	for _, z := range rows.Val() {
		key, _ := z.Member.(string)
		out = append(out, HeldPartition{Key: partition.Key(key), Since: msTime(int64(z.Score))})
	}
	return out, total.Val(), nil
}

// LastEvents returns the newest count events of the queue's stream (Config.Events), oldest
// first; none when the queue keeps no stream. It fails with ErrInvalid for a count outside [1,
// MaxEventsRead], and with the context's or Redis's error.
func (e *Engine) LastEvents(ctx context.Context, count int) ([]Event, error) {
	if count < 1 || count > MaxEventsRead {
		return nil, invalidf("event count %d is outside [1, %d]", count, MaxEventsRead)
	}
	ms, err := e.client.XRevRangeN(ctx, e.keys.Events(), "+", "-", int64(count)).Result()
	if err != nil {
		return nil, fmt.Errorf("srq: read events of %s: %w", e.cfg.Queue, err)
	}
	out := make([]Event, len(ms))
	for i, m := range ms {
		out[len(ms)-1-i] = parseEvent(m)
	}
	return out, nil
}

// AnnouncedEvents returns the size of the event stream that the queue whose keys are k announced
// (AnnounceEvents), 0 when it announced none: an engine made with Config.Events set to it writes
// the queue's events, as the queue's own engines do, for the changes it makes (an operator's
// requeue, purge, cancel or resume). It fails with the context's or Redis's error.
func AnnouncedEvents(ctx context.Context, client redis.UniversalClient, k Keys) (int, error) {
	n, err := client.Get(ctx, k.eventsCap()).Int()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("srq: event stream of %s: %w", k.base, err)
	case n < 0:
		return 0, nil
	}
	return n, nil
}
