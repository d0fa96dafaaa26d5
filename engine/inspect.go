package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/srqueue/srq/partition"
)

// The scripts behind the operator views (package inspect). Each costs O(log n + page size).
var (
	scriptOverview       = mustScript("overview")
	scriptPartitions     = mustScript("partitions")
	scriptInFlight       = mustScript("inflight")
	scriptDeadScan       = mustScript("dead_scan")
	scriptSetQueuePaused = mustScript("set_queue_paused")
)

// MaxInspectPage is the largest page the operator views of this file return in one call.
const MaxInspectPage = 10_000

// SeenConsumer is a consumer with the server time of its last fetch or lease extension.
type SeenConsumer struct {
	ID       string
	LastSeen time.Time
}

// Overview is what an operator sees first of a queue: Stats plus the sizes of the operator
// indexes, whether the queue is paused, and the consumers seen recently.
type Overview struct {
	Stats
	// PendingPartitions counts partitions holding pending tasks.
	PendingPartitions int64
	// PausedPartitions counts paused partitions.
	PausedPartitions int64
	// PausedAt is when the whole queue was paused (PauseQueue); zero when it is not.
	PausedAt time.Time
	// ConsumerCount counts the consumers seen within the last hour (at most 10,000 are kept).
	ConsumerCount int64
	// Consumers are the most recently seen of them, newest first.
	Consumers []SeenConsumer
}

// Overview reads the queue's overview in one round trip, listing up to consumers consumers. It
// fails with ErrInvalid for consumers outside [0, MaxInspectPage], and with Redis's error.
func (e *Engine) Overview(ctx context.Context, consumers int) (Overview, error) {
	if consumers < 0 || consumers > MaxInspectPage {
		return Overview{}, invalidf("consumer count %d is outside [0, %d]", consumers, MaxInspectPage)
	}
	res, err := e.run(ctx, scriptOverview, consumers)
	if err != nil {
		return Overview{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 10 || len(rows)%2 != 0 {
		return Overview{}, fmt.Errorf("srq: overview: malformed reply %v", res)
	}
	var head [9]int64
	for i, j := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8} {
		if head[i], err = replyInt(rows[j]); err != nil {
			return Overview{}, fmt.Errorf("srq: overview: %w", err)
		}
	}
	o := Overview{Stats: Stats{ReadyPartitions: head[0], ScheduledPartitions: head[1], InFlight: head[2], Dead: head[3],
		ServerTime: time.UnixMilli(head[4])}, PendingPartitions: head[5], PausedPartitions: head[6], ConsumerCount: head[8]}
	if head[7] > 0 {
		o.PausedAt = time.UnixMilli(head[7])
	}
	cs, err := replySlice(rows[9])
	if err != nil || len(cs)%2 != 0 {
		return Overview{}, fmt.Errorf("srq: overview: malformed consumers %v", rows[9])
	}
	for i := 0; i < len(cs); i += 2 {
		id, err1 := replyString(cs[i])
		at, err2 := replyString(cs[i+1])
		ms, err3 := strconv.ParseFloat(at, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return Overview{}, fmt.Errorf("srq: overview: malformed consumers %v", rows[9])
		}
		o.Consumers = append(o.Consumers, SeenConsumer{ID: id, LastSeen: time.UnixMilli(int64(ms))})
	}
	if err := o.setCounters(rows[10:]); err != nil {
		return Overview{}, err
	}
	return o, nil
}

// setCounters stores the name, value pairs of the stats hash. A publish counts its tasks once, in
// pub, which stands for both published and pending (pending counts the other changes: fetches,
// returns, requeues): one HINCRBY a publish instead of two.
func (s *Stats) setCounters(rows []any) error {
	var pub int64
	fields := map[string]*int64{
		"pending": &s.Pending, "published": &s.Published, "pub": &pub, "duplicates": &s.Duplicates, "acked": &s.Acked,
		"rejected": &s.Rejected, "recovered": &s.Recovered, "dead": &s.DeadLettered,
		"requeued": &s.Requeued, "purged": &s.Purged, "trimmed": &s.Trimmed, "taken_back": &s.TakenBack,
		"handed_back": &s.HandedBack, "waiting": &s.Waiting, "cancelled": &s.Cancelled, "flows_started": &s.FlowsStarted,
		"flows_completed": &s.FlowsCompleted, "flows_failed": &s.FlowsFailed, "replaced": &s.Replaced, "dropped": &s.Dropped,
	}
	for i := 0; i+1 < len(rows); i += 2 {
		name, err := replyString(rows[i])
		if err != nil {
			return err
		}
		if p, ok := fields[name]; ok {
			if *p, err = replyInt(rows[i+1]); err != nil {
				return err
			}
		}
	}
	s.Pending += pub
	s.Published += pub
	return nil
}

// PartitionIndex names an index of partitions that PartitionsBy reads in order.
type PartitionIndex string

// The partition indexes.
const (
	IndexDepth  PartitionIndex = "depth"  // most pending tasks first
	IndexAge    PartitionIndex = "age"    // earliest available-at of the earliest pending task first
	IndexPaused PartitionIndex = "paused" // paused partitions, longest paused first
	IndexHeld   PartitionIndex = "held"   // ordered partitions held by a dead letter, longest held first
)

// PartitionInfo describes one partition.
type PartitionInfo struct {
	Key             partition.Key
	Pending         int64
	HeadAvailableAt time.Time // zero when nothing is pending
	PausedAt        time.Time // zero when not paused
	Limit           int       // concurrency limit; 0 when none
	BlockedUntil    time.Time // zero when not blocked
	Ready           bool      // in the round-robin now
	DueAt           time.Time // when scheduled, the time it can next hand out work; else zero
	Leased          int64     // leases that hold it (ordered) or count against its limit
	// HeldBy is the id of the dead letter that holds this ordered partition (its task was
	// published to hold it on death), "" when none; HeldError is that dead letter's last error.
	// Requeueing or deleting the dead letter, or resuming the partition, releases it.
	HeldBy, HeldError string
}

// Paused says whether the partition is paused.
func (p PartitionInfo) Paused() bool { return !p.PausedAt.IsZero() }

// PartitionsBy returns the first limit partitions of index, each described, and the server time.
// It costs O(log n + limit). It fails with ErrInvalid for an unknown index or a limit outside
// [1, MaxInspectPage], and with Redis's error.
func (e *Engine) PartitionsBy(ctx context.Context, index PartitionIndex, limit int) ([]PartitionInfo, time.Time, error) {
	switch index {
	case IndexDepth, IndexAge, IndexPaused, IndexHeld:
	default:
		return nil, time.Time{}, invalidf("unknown partition index %q", string(index))
	}
	if limit < 1 || limit > MaxInspectPage {
		return nil, time.Time{}, invalidf("partition limit %d is outside [1, %d]", limit, MaxInspectPage)
	}
	return e.partitions(ctx, string(index), limit)
}

// Partitions describes the partitions named, in order, and returns the server time. It fails with
// ErrInvalid for an invalid key or more than MaxInspectPage keys, and with Redis's error.
func (e *Engine) Partitions(ctx context.Context, keys ...partition.Key) ([]PartitionInfo, time.Time, error) {
	if len(keys) > MaxInspectPage {
		return nil, time.Time{}, invalidf("%d partitions; at most %d per call", len(keys), MaxInspectPage)
	}
	args := make([]any, 0, len(keys))
	for _, p := range keys {
		if err := p.Validate(); err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		args = append(args, string(p))
	}
	return e.partitions(ctx, "keys", len(keys), args...)
}

func (e *Engine) partitions(ctx context.Context, by string, limit int, keys ...any) ([]PartitionInfo, time.Time, error) {
	res, err := e.run(ctx, scriptPartitions, append([]any{by, limit}, keys...)...)
	if err != nil {
		return nil, time.Time{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 1 {
		return nil, time.Time{}, fmt.Errorf("srq: partitions: malformed reply %v", res)
	}
	now, err := replyInt(rows[0])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("srq: partitions: %w", err)
	}
	out := make([]PartitionInfo, 0, len(rows)-1)
	for _, row := range rows[1:] {
		f, err := replySlice(row)
		if err != nil || len(f) != 11 {
			return nil, time.Time{}, fmt.Errorf("srq: partitions: malformed row %v", row)
		}
		key, err := replyString(f[0])
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("srq: partitions: %w", err)
		}
		var n [8]int64
		for i := range n {
			if n[i], err = replyInt(f[i+1]); err != nil {
				return nil, time.Time{}, fmt.Errorf("srq: partitions: %w", err)
			}
		}
		out = append(out, PartitionInfo{Key: partition.Key(key), Pending: n[0], HeadAvailableAt: msTime(n[1]),
			PausedAt: msTime(n[2]), Limit: int(n[3]), BlockedUntil: msTime(n[4]), Ready: n[5] == 1,
			DueAt: msTime(n[6]), Leased: n[7]})
		info := &out[len(out)-1]
		if info.HeldBy, err = replyString(f[9]); err == nil {
			info.HeldError, err = replyString(f[10])
		}
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("srq: partitions: %w", err)
		}
	}
	return out, time.UnixMilli(now), nil
}

// msTime is the time of a ms timestamp, zero for 0.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Lease is a leased task as InFlight lists it.
type Lease struct {
	ID          string
	Deadline    time.Time // server clock
	Partition   partition.Key
	Priority    int
	Attempt     int
	MaxAttempts int
	Consumer    string
	EnqueuedAt  time.Time
	Crashes     int
}

// InFlight returns up to limit leased tasks, earliest lease deadline first, skipping offset of
// them, and how many are leased in all. It costs O(log n + offset + limit). It fails with
// ErrInvalid for a negative offset, a limit outside [1, MaxInspectPage] or offset+limit above
// MaxInspectPage, and with Redis's error.
func (e *Engine) InFlight(ctx context.Context, offset, limit int) ([]Lease, int64, error) {
	// offset is compared with MaxInspectPage-limit: offset+limit could overflow.
	if offset < 0 || limit < 1 || limit > MaxInspectPage || offset > MaxInspectPage-limit {
		return nil, 0, invalidf("in-flight page offset %d limit %d (offset+limit at most %d)", offset, limit, MaxInspectPage)
	}
	res, err := e.run(ctx, scriptInFlight, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 1 {
		return nil, 0, fmt.Errorf("srq: in flight: malformed reply %v", res)
	}
	total, err := replyInt(rows[0])
	if err != nil {
		return nil, 0, fmt.Errorf("srq: in flight: %w", err)
	}
	out := make([]Lease, 0, len(rows)-1)
	for _, row := range rows[1:] {
		f, err := replySlice(row)
		if err != nil || len(f) != 9 {
			return nil, 0, fmt.Errorf("srq: in flight: malformed row %v", row)
		}
		var s [4]string
		for i, j := range []int{0, 2, 3, 6} {
			if s[i], err = replyString(f[j]); err != nil {
				return nil, 0, fmt.Errorf("srq: in flight: %w", err)
			}
		}
		var n [5]int64
		for i, j := range []int{1, 4, 5, 7, 8} {
			if n[i], err = replyInt(f[j]); err != nil {
				return nil, 0, fmt.Errorf("srq: in flight: %w", err)
			}
		}
		prio, err := strconv.Atoi(s[2])
		if err != nil {
			return nil, 0, fmt.Errorf("srq: in flight: task %s: bad priority %q", s[0], s[2])
		}
		out = append(out, Lease{ID: s[0], Deadline: time.UnixMilli(n[0]), Partition: partition.Key(s[1]),
			Priority: prio, Attempt: int(n[1]), MaxAttempts: int(n[2]), Consumer: s[3],
			EnqueuedAt: msTime(n[3]), Crashes: int(n[4])})
	}
	return out, total, nil
}

// DeadScan selects dead letters for ScanDead.
type DeadScan struct {
	// Cursor is where to continue: empty for the newest letter, else a DeadScanPage.Next.
	Cursor string
	// Limit is the most letters returned, in [1, MaxInspectPage].
	Limit int
	// Window is the most letters looked at, in [Limit, MaxInspectPage]; 0 means Limit.
	Window int
	// ByPartition keeps only the letters of Partition.
	ByPartition bool
	Partition   partition.Key
	// ErrorContains keeps only the letters whose last error contains it, ignoring ASCII case.
	ErrorContains string
	// IDsOnly leaves out payloads and headers.
	IDsOnly bool
}

// ScannedLetter is a dead letter with its score in the dead set, which orders the letters
// (newest highest) and is unique in the queue.
type ScannedLetter struct {
	DeadLetter
	Score int64
}

// DeadScanPage is one step of ScanDead.
type DeadScanPage struct {
	Total   int64 // dead letters in the queue
	Letters []ScannedLetter
	// Next continues the scan below the last letter looked at; empty when the scan reached the
	// oldest letter.
	Next string
}

// ScanDead looks at up to q.Window dead letters, newest first, from q.Cursor, and returns the
// first q.Limit of them that pass its filters. It costs O(log n + window). It fails with
// ErrInvalid for a malformed cursor, limit or window, and with Redis's error.
func (e *Engine) ScanDead(ctx context.Context, q DeadScan) (DeadScanPage, error) {
	if q.Window == 0 {
		q.Window = q.Limit
	}
	if q.Limit < 1 || q.Limit > MaxInspectPage || q.Window < q.Limit || q.Window > MaxInspectPage {
		return DeadScanPage{}, invalidf("dead-letter scan limit %d window %d (1 <= limit <= window <= %d)",
			q.Limit, q.Window, MaxInspectPage)
	}
	if q.Cursor != "" {
		if n, err := strconv.ParseInt(q.Cursor, 10, 64); err != nil || n < 0 {
			return DeadScanPage{}, invalidf("malformed dead-letter cursor %q", q.Cursor)
		}
	}
	if q.ByPartition {
		if err := q.Partition.Validate(); err != nil {
			return DeadScanPage{}, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	flag := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	res, err := e.run(ctx, scriptDeadScan, q.Cursor, q.Limit, q.Window, flag(q.ByPartition), string(q.Partition),
		asciiLower(q.ErrorContains), flag(!q.IDsOnly))
	if err != nil {
		return DeadScanPage{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 2 {
		return DeadScanPage{}, fmt.Errorf("srq: dead scan: malformed reply %v", res)
	}
	var page DeadScanPage
	if page.Total, err = replyInt(rows[0]); err != nil {
		return DeadScanPage{}, fmt.Errorf("srq: dead scan: %w", err)
	}
	if page.Next, err = replyString(rows[1]); err != nil {
		return DeadScanPage{}, fmt.Errorf("srq: dead scan: %w", err)
	}
	for _, row := range rows[2:] {
		f, err := replySlice(row)
		if err != nil || len(f) != 11 {
			return DeadScanPage{}, fmt.Errorf("srq: dead scan: malformed row %v", row)
		}
		score, err := replyString(f[1])
		if err != nil {
			return DeadScanPage{}, fmt.Errorf("srq: dead scan: %w", err)
		}
		sc, err := strconv.ParseInt(score, 10, 64)
		if err != nil {
			return DeadScanPage{}, fmt.Errorf("srq: dead scan: malformed score %q", score)
		}
		// The same row as dead_list.lua's, with the died-at from the score.
		d, err := parseDeadLetter([]any{f[0], f[2], f[3], f[4], f[5], f[6], sc / 1000, f[7], f[8], f[9], f[10]})
		if err != nil {
			return DeadScanPage{}, err
		}
		page.Letters = append(page.Letters, ScannedLetter{DeadLetter: d, Score: sc})
	}
	return page, nil
}

// asciiLower lowers ASCII letters only, as Lua's string.lower does in Redis.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// PauseQueue stops every fetch of the queue from handing out work until ResumeQueue; publishes,
// acks, rejects, lease extensions and recovery go on. The pause lasts across restarts. It fails
// with Redis's error.
func (e *Engine) PauseQueue(ctx context.Context) error {
	_, err := e.run(ctx, scriptSetQueuePaused, 1)
	return err
}

// ResumeQueue ends a PauseQueue and wakes blocked fetchers; resuming a queue that is not paused
// does nothing. It fails with Redis's error.
func (e *Engine) ResumeQueue(ctx context.Context) error {
	_, err := e.run(ctx, scriptSetQueuePaused, 0)
	return err
}
