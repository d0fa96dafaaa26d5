package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/srqueue/srq/partition"
)

// DeadLetter is a task that failed for good, as the dead-letter list shows it.
type DeadLetter struct {
	ID          string
	Partition   partition.Key
	Priority    int
	Attempts    int
	MaxAttempts int
	EnqueuedAt  time.Time
	DiedAt      time.Time
	Payload     []byte
	Headers     map[string]string
	Crashes     int
	LastError   string
}

// DeadPage is one page of dead letters, newest first.
type DeadPage struct {
	Total   int // dead letters in the queue
	Letters []DeadLetter
}

// maxSortedSet is the most members a Redis sorted set holds (2^32 - 1): no page starts later.
const maxSortedSet = 1<<32 - 1

// DeadLetters returns up to limit dead letters, newest first, skipping offset of them. Its cost is
// O(log n + limit). It fails with ErrInvalid for an offset outside [0, 2^32) (no sorted set holds
// more letters) or a limit outside [1, 10000], and with the context's or Redis's error.
func (e *Engine) DeadLetters(ctx context.Context, offset, limit int) (DeadPage, error) {
	// Lua reads the offset as a double: near 2^63 the range it asks Redis for is out of range.
	if offset < 0 || int64(offset) > maxSortedSet || limit < 1 || limit > 10000 {
		return DeadPage{}, invalidf("dead-letter page offset %d limit %d", offset, limit)
	}
	res, err := e.run(ctx, scriptDeadList, offset, limit)
	if err != nil {
		return DeadPage{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) < 1 {
		return DeadPage{}, fmt.Errorf("srq: dead letters: malformed reply %v", res)
	}
	total, err := replyInt(rows[0])
	if err != nil {
		return DeadPage{}, err
	}
	page := DeadPage{Total: int(total), Letters: make([]DeadLetter, 0, len(rows)-1)}
	for _, row := range rows[1:] {
		d, err := parseDeadLetter(row)
		if err != nil {
			return DeadPage{}, err
		}
		page.Letters = append(page.Letters, d)
	}
	return page, nil
}

// parseDeadLetter reads one row of dead_list.lua: {id, partition, priority, attempts, max
// attempts, enqueued-at ms, died-at ms, payload, headers, crashes, last error}. Fields the record
// holds in a form srq did not write (a fetch dead-letters such a task, saying so in its last error)
// are left zero rather than failing the page, so the letter can still be listed and purged.
func parseDeadLetter(v any) (DeadLetter, error) {
	f, err := replySlice(v)
	if err != nil || len(f) != 11 {
		return DeadLetter{}, fmt.Errorf("srq: dead letters: malformed row %v", v)
	}
	var s [6]string
	for i, j := range []int{0, 1, 2, 7, 8, 10} {
		if s[i], err = replyString(f[j]); err != nil {
			return DeadLetter{}, err
		}
	}
	var n [5]int64
	for i, j := range []int{3, 4, 5, 6, 9} {
		n[i], _ = replyInt(f[j]) // zero when unreadable
	}
	d := DeadLetter{ID: s[0], Partition: partition.Key(s[1]), Payload: []byte(s[3]), LastError: s[5],
		Attempts: int(n[0]), MaxAttempts: int(n[1]), EnqueuedAt: time.UnixMilli(n[2]), DiedAt: time.UnixMilli(n[3]),
		Crashes: int(n[4])}
	d.Priority, _ = strconv.Atoi(s[2])
	d.Headers, _ = decodeHeaders([]byte(s[4]))
	return d, nil
}

// Requeue moves dead letters back to pending as if newly published: behind the work already
// pending in their partition, available now, attempts reset; the last error stays on the record.
// It returns one error per id: nil, ErrNotFound, ErrNotDead, or ErrTooManyPriorities when the
// letter's partition has pending tasks at MaxPriorityLevels priorities other than 0 and the
// letter's priority is another one (it stays dead). It fails with ErrInvalid for an
// invalid id, before anything is sent, and with the context's or Redis's error, after which the
// dead letters may or may not have been moved.
func (e *Engine) Requeue(ctx context.Context, ids []string) ([]error, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		if err := validID(id, false); err != nil {
			return nil, fmt.Errorf("%w: id %d: %w", ErrInvalid, i, err)
		}
		args[i] = id
	}
	return inBatches(len(ids), func(lo, hi int) ([]error, error) {
		return e.runCodes(ctx, scriptRequeue, hi-lo, args[lo:hi])
	})
}

// Purge deletes the dead letters with the given ids and returns how many it deleted; ids that are
// not dead letters are left alone. It fails with ErrInvalid for an invalid id, before anything is
// sent, and with the context's or Redis's error, after which the letters may or may not have been
// deleted.
func (e *Engine) Purge(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, 0)
	for i, id := range ids {
		if err := validID(id, false); err != nil {
			return 0, fmt.Errorf("%w: id %d: %w", ErrInvalid, i, err)
		}
		args = append(args, id)
	}
	n, _, err := e.purge(ctx, args)
	return n, err
}

// purgeChunk is how many dead letters one PurgeAll round trip deletes.
const purgeChunk = 1000

// PurgeAll deletes every dead letter, a bounded chunk per round trip, and returns how many it
// deleted. It fails with the context's or Redis's error, and then also returns how many it deleted
// before.
func (e *Engine) PurgeAll(ctx context.Context) (int, error) {
	total := 0
	for {
		n, left, err := e.purge(ctx, []any{purgeChunk})
		total += n
		if err != nil || left == 0 || n == 0 {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

func (e *Engine) purge(ctx context.Context, args []any) (deleted, left int, err error) {
	res, err := e.run(ctx, scriptPurge, args...)
	if err != nil {
		return 0, 0, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) != 2 {
		return 0, 0, fmt.Errorf("srq: purge: malformed reply %v", res)
	}
	d, err := replyInt(rows[0])
	if err != nil {
		return 0, 0, err
	}
	l, err := replyInt(rows[1])
	return int(d), int(l), err
}
