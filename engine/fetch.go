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

// Delivery is one leased task as a consumer receives it.
type Delivery struct {
	ID          string
	Token       Token // the fencing token of this delivery
	Partition   partition.Key
	Priority    int
	Attempt     int // 1 on the first delivery
	MaxAttempts int // 0: no limit
	EnqueuedAt  time.Time
	AvailableAt time.Time
	Payload     []byte
	Headers     map[string]string
	Crashes     int    // how often a lease of this task expired
	LastError   string // the reason the last failed delivery gave ("lease expired" for a crash), if any
	// LeaseDeadline is when the lease ends, on this machine's clock: the time the fetch was sent
	// plus the lease in whole milliseconds, less the millisecond the server's clock may have
	// rounded off, so it is never later than the server's deadline.
	LeaseDeadline time.Time
}

// Receipt returns what Ack, Reject, Extend and Kill need to name this delivery.
func (d *Delivery) Receipt() Receipt { return Receipt{ID: d.ID, Token: d.Token} }

// Receipt names one delivery of a task: its id and fencing token.
type Receipt struct {
	ID    string
	Token Token
	// Result is what Ack records as the task's result, kept when the task was published to keep
	// its outcome (a flow step, a task waited for) or under Config.ResultRetention; at most
	// MaxResultBytes. nil: none. The other operations ignore it.
	Result []byte
}

// Fetch leases up to n tasks to consumer for lease, serving ready partitions round-robin. It
// returns at once, with no tasks when none is ready. It fails with ErrInvalid for n < 1 or over
// MaxFetch, a lease under a millisecond or an empty consumer id, before anything is sent, and with
// the context's or Redis's error.
func (e *Engine) Fetch(ctx context.Context, consumer string, n int, lease time.Duration) ([]Delivery, error) {
	ds, _, err := e.fetch(ctx, consumer, n, lease)
	return ds, err
}

// FetchNext is Fetch that also says how long until the queue's next delayed task is due, as far
// as the fetch saw (-1: none), so a caller that waits itself (with Wait) knows how long it may. It
// fails as Fetch does.
func (e *Engine) FetchNext(ctx context.Context, consumer string, n int, lease time.Duration) ([]Delivery, time.Duration, error) {
	return e.fetch(ctx, consumer, n, lease)
}

// Wait blocks in Redis until a publish or a release makes work ready, d passes, or ctx ends; in
// slices of at most MaxBlock, so a cancellation is noticed. It reports whether it was woken (it
// took a wake-up token: a caller that cannot fetch now should hand it on with Wake); false when d
// passed. It fails with ctx's error when ctx ends, and with Redis's error.
func (e *Engine) Wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	end := time.Now().Add(d)
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		block := min(time.Until(end), e.cfg.MaxBlock)
		if dl, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(dl))
		}
		if block <= 0 {
			return false, nil
		}
		woken, err := e.blockWoken(ctx, block)
		if err != nil || woken {
			return woken, err
		}
	}
}

// Wake hands one wake-up token to the consumers blocked in Wait or FetchWait: one of them returns
// and fetches. A consumer that was woken but cannot fetch now (no free slot) calls it, so the work
// that woke it does not wait for the next publish or the end of another sleeper's wait. A token no
// one needs is harmless: the next fetch that finds nothing ready drops the tokens left. It fails
// with Redis's error.
func (e *Engine) Wake(ctx context.Context) error {
	if err := e.client.LPush(ctx, e.keys.Wake(), "1").Err(); err != nil {
		return fmt.Errorf("srq: wake: %w", err)
	}
	return nil
}

// FetchWait is Fetch that, when nothing is ready, blocks in Redis until a publish or a release
// makes work ready, the next delayed task is due, wait passes, or ctx ends. It returns no tasks and
// a nil error when wait passes. It fails with ErrInvalid as Fetch does, with the context's error
// when ctx ends, and with Redis's error.
func (e *Engine) FetchWait(ctx context.Context, consumer string, n int, lease, wait time.Duration) ([]Delivery, error) {
	end := time.Now().Add(wait)
	for {
		ds, nextDue, err := e.fetch(ctx, consumer, n, lease)
		if err != nil || len(ds) > 0 {
			return ds, err
		}
		if nextDue == 0 {
			// The fetch leased tasks, every one unreadable and dead-lettered (killUnreadable):
			// ready work may be behind them, so fetch again now rather than return empty.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		block := min(time.Until(end), e.cfg.MaxBlock)
		if nextDue >= 0 {
			block = min(block, nextDue)
		}
		if d, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(d))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if block <= 0 {
			return nil, nil
		}
		if err := e.block(ctx, block); err != nil {
			return nil, err
		}
	}
}

// shortBlockCap is the longest wait blockWoken sends as a fractional BLPOP over client: half of
// the client's ReadTimeout, so the reply comes before the read times out also across a slow
// network; 0 when the client has no read timeout or its options are not known.
func shortBlockCap(client redis.UniversalClient) time.Duration {
	var rt time.Duration
	switch c := client.(type) {
	case interface{ Options() *redis.Options }: // Client, also a failover one
		rt = c.Options().ReadTimeout
	case interface{ Options() *redis.ClusterOptions }:
		rt = c.Options().ReadTimeout
	case interface{ Options() *redis.RingOptions }:
		rt = c.Options().ReadTimeout
	}
	if rt <= 0 { // go-redis's normalized options: 0 and -1 both mean no read deadline
		return 0
	}
	return max(rt/2, time.Millisecond)
}

// block waits on the wake-up list for at most d.
func (e *Engine) block(ctx context.Context, d time.Duration) error {
	_, err := e.blockWoken(ctx, d)
	return err
}

// blockWoken waits on the wake-up list for at most d and reports whether a wake-up came. go-redis
// sends whole seconds for BLPop, so a shorter wait is sent as a fractional timeout (Redis 6+). For
// that command go-redis does not know it blocks, and reads its reply within the client's
// ReadTimeout: such a wait is cut to shortBlockCap, and the caller, finding it not woken, waits again.
func (e *Engine) blockWoken(ctx context.Context, d time.Duration) (bool, error) {
	woken, err := e.blockPop(ctx, e.keys.Wake(), d)
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("srq: wait for work: %w", err)
	}
	return woken, err
}

// blockPop pops an element of list key, waiting for one for at most d (see blockWoken), and
// reports whether it got one. It fails with ctx's error when ctx ended, else with Redis's.
func (e *Engine) blockPop(ctx context.Context, key string, d time.Duration) (bool, error) {
	var err error
	if d >= time.Second {
		err = e.client.BLPop(ctx, d.Truncate(time.Second), key).Err()
	} else {
		if e.shortBlockCap > 0 {
			d = min(d, e.shortBlockCap)
		}
		secs := strconv.FormatFloat(max(d.Seconds(), 0.001), 'f', 3, 64)
		err = e.client.Do(ctx, "blpop", key, secs).Err()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return false, ctxErr
		}
		return false, err
	}
	return true, nil
}

// fetch runs one fetch, merged with concurrent calls (merge.go); nextDue is how long until delayed
// work is due (-1: none).
func (e *Engine) fetch(ctx context.Context, consumer string, n int, lease time.Duration) ([]Delivery, time.Duration, error) {
	run, err := e.fetchRun(consumer, n, lease)
	if err != nil {
		return nil, 0, err
	}
	o := &op{consumer: consumer, n: n, run: run, lease: lease}
	if err := e.calls.do(ctx, o); err != nil {
		return nil, 0, err
	}
	return o.ds, o.nextDue, o.err
}

// fetchRun checks a fetch's arguments and returns the longest run of one ordered partition it may
// take.
func (e *Engine) fetchRun(consumer string, n int, lease time.Duration) (int, error) {
	switch {
	case n < 1:
		return 0, invalidf("fetch of %d tasks", n)
	case n > MaxFetch:
		return 0, invalidf("fetch of %d tasks is over the limit of %d (MaxFetch)", n, MaxFetch)
	case lease < time.Millisecond:
		return 0, invalidf("lease %v is below 1ms", lease)
	case consumer == "":
		return 0, invalidf("empty consumer id")
	}
	run := n
	if e.cfg.MaxOrderedRun > 0 {
		run = min(run, e.cfg.MaxOrderedRun)
	}
	return run, nil
}

// parseFetch reads fetch.lua's reply; the leases end lease after sent at the latest. A task whose
// record cannot be read (a field written by something other than srq) is not delivered: it is
// returned among unreadable, to be dead-lettered (killUnreadable), so it does not fail the fetch
// of the tasks beside it, which would stay leased unseen until their leases expire.
func parseFetch(res any, sent time.Time, lease time.Duration) (ds []Delivery, unreadable []Failure, nextDue time.Duration, err error) {
	rows, err := replySlice(res)
	if err != nil || len(rows) < 3 || (len(rows)-3)%taskFields != 0 {
		return nil, nil, 0, fmt.Errorf("srq: fetch: malformed reply %v", res)
	}
	wait, err := replyInt(rows[2])
	if err != nil {
		return nil, nil, 0, err
	}
	nextDue = time.Duration(-1)
	if wait >= 0 {
		// Capped so the conversion cannot overflow; FetchWait never waits that long in one go.
		nextDue = time.Duration(min(wait, int64(24*time.Hour/time.Millisecond))) * time.Millisecond
	}
	ds = make([]Delivery, 0, (len(rows)-3)/taskFields)
	for f := rows[3:]; len(f) > 0; f = f[taskFields:] {
		r, err := leaseOf(f)
		if err != nil { // the script writes the lease itself: the reply is broken
			return nil, nil, 0, err
		}
		d, err := parseDelivery(r, f[:taskFields])
		if err != nil {
			unreadable = append(unreadable, Failure{Receipt: r, Reason: "srq: unreadable task record: " + err.Error()})
			continue
		}
		d.LeaseDeadline = localDeadline(sent, lease)
		ds = append(ds, d)
	}
	return ds, unreadable, nextDue, nil
}

// leaseOf reads the id and the fencing token of one task in fetch.lua's reply, which the script
// writes itself, whatever the record holds.
func leaseOf(f []any) (Receipt, error) {
	id, err := replyString(f[0])
	if err != nil {
		return Receipt{}, err
	}
	s, err := replyString(f[1])
	if err != nil {
		return Receipt{}, err
	}
	token, err := parseToken(s)
	return Receipt{ID: id, Token: token}, err
}

// AckFetch acks rs and then leases up to n more tasks to consumer, atomically and in one round
// trip: Ack followed by FetchNext, for a consumer that finished tasks and has room for more. A
// partition the ack releases (an ordered one whose last leased task is acked) can be served by the
// same call. It returns one error per receipt as Ack does (nil, ErrStaleToken or ErrNotFound), the
// deliveries, and how long until the next delayed task is due as FetchNext does (-1: none). It
// fails with ErrInvalid as Fetch does, before anything is sent, and with Redis's error, after
// which, as after a failed Ack, the acks may or may not have happened.
func (e *Engine) AckFetch(ctx context.Context, rs []Receipt, consumer string, n int, lease time.Duration) ([]error, []Delivery, time.Duration, error) {
	run, err := e.fetchRun(consumer, n, lease)
	if err == nil {
		err = e.checkResults(rs)
	}
	if err == nil && len(rs) > MaxBatch {
		err = invalidf("an ack of %d tasks with a fetch is over the limit of %d (MaxBatch)", len(rs), MaxBatch)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	o := &op{acks: rs, consumer: consumer, n: n, run: run, lease: lease}
	if err := e.calls.do(ctx, o); err != nil {
		return nil, nil, 0, err
	}
	if o.err != nil {
		return nil, nil, 0, o.err
	}
	return o.errs, o.ds, o.nextDue, nil
}

// taskFields is the number of values fetch.lua returns per task.
const taskFields = 12

// parseDelivery reads the other values of one task in fetch.lua's reply, whose lease r holds:
// partition, priority, attempt, max attempts, enqueued-at ms, available-at ms, payload, headers,
// crashes, last error. Most come from the task's record, so it fails on what srq did not write.
func parseDelivery(r Receipt, f []any) (Delivery, error) {
	var err error
	d := Delivery{ID: r.ID, Token: r.Token}
	var s [4]string
	for i, j := range []int{2, 3, 8, 9} {
		if s[i], err = replyString(f[j]); err != nil {
			return Delivery{}, err
		}
	}
	var n [5]int64
	for i, j := range []int{4, 5, 6, 7, 10} {
		if n[i], err = replyInt(f[j]); err != nil {
			return Delivery{}, err
		}
	}
	if d.LastError, err = replyString(f[11]); err != nil {
		return Delivery{}, err
	}
	d.Partition, d.Payload = partition.Key(s[0]), []byte(s[2])
	if d.Priority, err = strconv.Atoi(s[1]); err != nil {
		return Delivery{}, fmt.Errorf("srq: fetch: bad priority %q", s[1])
	}
	if d.Headers, err = decodeHeaders([]byte(s[3])); err != nil {
		return Delivery{}, fmt.Errorf("srq: task %s: %w", d.ID, err)
	}
	d.Attempt, d.MaxAttempts = int(n[0]), int(n[1])
	d.EnqueuedAt, d.AvailableAt = time.UnixMilli(n[2]), time.UnixMilli(n[3])
	d.Crashes = int(n[4])
	return d, nil
}
