package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// LeaseState is what a check of a delivery's lease found in Redis.
type LeaseState string

// The states a lease check reports.
const (
	// LeaseUnchecked: no check was made (Middleware, Start).
	LeaseUnchecked LeaseState = ""
	// LeaseValid: Redis held the task leased with the delivery's token, its deadline ahead of the
	// server's clock.
	LeaseValid LeaseState = "valid"
	// LeaseExpired: Redis held the task leased with the delivery's token, its deadline passed: no
	// recovery had taken it back yet, and one may at any moment.
	LeaseExpired LeaseState = "expired"
	// LeaseGone: Redis did not hold the task leased with the delivery's token: it was taken back,
	// settled, or delivered again.
	LeaseGone LeaseState = "gone"
	// LeaseUnknown: the check failed (Event.Err says why).
	LeaseUnknown LeaseState = "unknown"
)

// Lease is what a LeaseFunc found of a delivery's lease at one instant of the server's clock.
type Lease struct {
	State LeaseState
	Left  time.Duration // time left to the deadline by the server's clock; negative past it; 0 when gone
}

// Valid says whether l is a lease in force: held with the delivery's token, its deadline ahead.
func (l Lease) Valid() bool { return l.State == LeaseValid }

// LeaseFunc reads what Redis holds of delivery d's lease, at one instant of the server's clock.
// RedisLease returns one for a srq queue.
type LeaseFunc func(ctx context.Context, d *srq.Delivery) (Lease, error)

// LeaseMiddleware is Middleware that also checks each delivery's lease with lease right before
// the handler begins, and records what it found in the start event (Event.Lease), so that Check
// reports every execution that started without a valid lease (Expired). The check runs after the
// worker decided to start the handler, before the start is recorded and before the handler
// begins: a lease it does not find valid had ended before the handler began. Put it first
// (outermost). It costs a round trip per execution. A check that fails is recorded as
// LeaseUnknown with its error (Event.Err).
func (r *Recorder) LeaseMiddleware(worker string, lease LeaseFunc) srq.Middleware {
	return r.middleware(worker, lease)
}

// leaseCheckTimeout bounds one lease check.
const leaseCheckTimeout = 5 * time.Second

// checkLease runs lease for d and returns what the start event records of it. It runs even when
// ctx has ended: a handler started after its lease was lost is what it is there to see.
func checkLease(ctx context.Context, lease LeaseFunc, d *srq.Delivery) (LeaseState, int64, string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseCheckTimeout)
	defer cancel()
	l, err := lease(ctx, d)
	if err != nil {
		return LeaseUnknown, 0, err.Error()
	}
	return l.State, int64(l.Left), ""
}

// leaseScript reads, atomically, the server's clock, the lease of task ARGV[1] (its value in the
// leases hash KEYS[1]: fencing token, 20 digits, first) and its deadline (its score in the inflight
// set KEYS[2], ms). Returns {seconds, microseconds, lease or false, deadline or false}. One script,
// so the clock and the lease are read at one instant, on the node that holds the queue.
var leaseScript = redis.NewScript(`
local t = redis.call('TIME')
return {t[1], t[2], redis.call('HGET', KEYS[1], ARGV[1]), redis.call('ZSCORE', KEYS[2], ARGV[1])}
`)

// RedisLease returns a LeaseFunc that reads a delivery's lease in the shard shardOf gives for its
// partition (Queue.ShardOf), with the server's clock, in one script call. The lease is held when
// the queue's leases hash names the task with the delivery's token; it is valid when also its
// deadline is ahead of the server's clock (a deadline the clock has reached is one recovery may
// take back: recover.lua takes deadlines up to now). It fails with Redis's error or on a reply it
// cannot read.
func RedisLease(shardOf func(partition.Key) *engine.Engine) LeaseFunc {
	return func(ctx context.Context, d *srq.Delivery) (Lease, error) {
		eng := shardOf(d.Partition)
		k := eng.Keys()
		res, err := leaseScript.Run(ctx, eng.Client(), []string{k.Leases(), k.Inflight()}, d.ID).Slice()
		if err != nil {
			return Lease{}, fmt.Errorf("history: lease of %s: %w", d.ID, err)
		}
		if len(res) != 4 {
			return Lease{}, fmt.Errorf("history: lease of %s: reply %v", d.ID, res)
		}
		sec, err1 := replyInt(res[0])
		usec, err2 := replyInt(res[1])
		if err := errors.Join(err1, err2); err != nil {
			return Lease{}, fmt.Errorf("history: lease of %s: server time: %w", d.ID, err)
		}
		v, _ := res[2].(string)
		score, _ := res[3].(string)
		if len(v) < 20 || v[:20] != d.Token.String() || score == "" {
			return Lease{State: LeaseGone}, nil
		}
		deadline, err := strconv.ParseInt(score, 10, 64)
		if err != nil {
			return Lease{}, fmt.Errorf("history: lease of %s: deadline %q: %w", d.ID, score, err)
		}
		left := time.Duration(deadline)*time.Millisecond - (time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond)
		if left > 0 {
			return Lease{State: LeaseValid, Left: left}, nil
		}
		return Lease{State: LeaseExpired, Left: left}, nil
	}
}

// replyInt reads an integer that Redis returns as a string (TIME's parts).
func replyInt(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		return strconv.ParseInt(x, 10, 64)
	case int64:
		return x, nil
	}
	return 0, fmt.Errorf("not an integer: %v", v)
}
