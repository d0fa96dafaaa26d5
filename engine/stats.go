package engine

import (
	"context"
	"fmt"
	"time"
)

// Stats are a queue's sizes and counters, read from indexes and counters the scripts keep, never
// from a scan.
type Stats struct {
	Pending             int64 // tasks waiting, due or delayed
	InFlight            int64 // tasks under lease
	Dead                int64 // dead letters now
	ReadyPartitions     int64 // partitions that can hand out work now
	ScheduledPartitions int64 // partitions whose next work is delayed or blocked
	// Counters since the queue was created. Published counts the tasks a publish added and the
	// flow steps that became pending when their parents released them (a step that waits counts
	// in Waiting until then).
	Published, Duplicates, Acked, Rejected, Recovered int64
	DeadLettered, Requeued, Purged, Trimmed           int64
	// TakenBack counts tasks returned because an earlier task of their ordered partition, leased
	// with them, was rejected.
	TakenBack int64
	// HandedBack counts tasks workers returned unrun, or cut off by their shutdown, without using an
	// attempt (Rejection.HandBack): the tasks a stopping worker had fetched or was running. They are
	// not counted in Rejected or TakenBack.
	HandedBack int64
	// Waiting is the flow steps waiting for their parents (also one on hold behind a parent that
	// is a dead letter, shown cancelled, until that letter is deleted) and the tasks parked for
	// their children or a signal without a timeout (dynamic workflows), none counted in Pending; Cancelled
	// counts the tasks cancelled since the queue was created.
	Waiting, Cancelled int64
	// FlowsStarted, FlowsCompleted and FlowsFailed count the flows whose home is this queue (their
	// first step's) that were published, that completed, and that failed. A failed flow that a
	// requeue brings back and that then completes is counted in both.
	FlowsStarted, FlowsCompleted, FlowsFailed int64
	// Replaced counts the debounced publishes that replaced the payload of their key's pending
	// task, and Dropped the throttled publishes that were dropped (Message.Debounce); neither
	// added a task.
	Replaced, Dropped int64
	// ServerTime is the Redis server's clock when the stats were read.
	ServerTime time.Time
}

// Stats reads the queue's sizes and counters in one round trip. It fails with the context's or
// Redis's error.
func (e *Engine) Stats(ctx context.Context) (Stats, error) {
	res, err := e.run(ctx, scriptStats)
	if err != nil {
		return Stats{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 5 || len(rows)%2 != 1 {
		return Stats{}, fmt.Errorf("srq: stats: malformed reply %v", res)
	}
	var head [5]int64
	for i := range head {
		if head[i], err = replyInt(rows[i]); err != nil {
			return Stats{}, err
		}
	}
	s := Stats{ReadyPartitions: head[0], ScheduledPartitions: head[1], InFlight: head[2], Dead: head[3],
		ServerTime: time.UnixMilli(head[4])}
	if err := s.setCounters(rows[5:]); err != nil {
		return Stats{}, err
	}
	return s, nil
}
