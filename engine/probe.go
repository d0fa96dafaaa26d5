package engine

import (
	"context"
	"fmt"
	"time"
)

// Due is what Probe found to do in one engine's queue slot.
type Due struct {
	// Expired says a lease has expired: Recover has tasks to return.
	Expired bool
	// Upkeep says Recover has other work: an outcome or ended flow past its retention.
	Upkeep bool
	// Convert says Recover has keys to convert back to their fast encoding, as after a load. On
	// a server configured so that the conversion does nothing (zset-max-listpack-value of 200 or
	// more) it stays set.
	Convert bool
	// Schedules says a schedule is due: FireSchedules has ticks to publish.
	Schedules bool
	// NextSchedule is how long until the earliest schedule not yet due is due, by the server's
	// clock; -1 when none is.
	NextSchedule time.Duration
	// Outbox is the number of messages in the flow outbox: Relay has them to deliver.
	Outbox int
	// AbandonedFlows says a flow publish began longer ago than Probe's abandon and has not
	// completed: RecoverFlows has it to undo.
	AbandonedFlows bool
}

// CanProbeTogether says whether Probe can look at a and b in one call; the same as
// CanWaitTogether: one client that sends a script over any keys to one server (not a Cluster or
// Ring client, where the queues' keys live in different slots).
func CanProbeTogether(a, b *Engine) bool { return CanWaitTogether(a, b) }

// Probe looks, in one read-only call, at what the background work of a worker (Recover,
// FireSchedules, Relay, RecoverFlows) has to do now in the queue slot of each of engs, and
// returns it, one Due per engine in the order of engs. abandon is how long a flow publish may
// take before RecoverFlows takes its publisher for dead (RecoverFlows' timeout; 0: 5 minutes).
// Every pair of engs must pass CanProbeTogether. It fails with ErrInvalid for no engines or
// engines that cannot be probed together, and with the context's or Redis's error.
func Probe(ctx context.Context, engs []*Engine, abandon time.Duration) ([]Due, error) {
	if len(engs) == 0 {
		return nil, invalidf("Probe: no engines")
	}
	args := make([]any, 0, len(engs)+1)
	args = append(args, max(abandon.Milliseconds(), 0))
	for _, e := range engs[1:] {
		if !CanProbeTogether(engs[0], e) {
			return nil, invalidf("Probe: queues %s and %s cannot be probed in one call", engs[0].cfg.Queue, e.cfg.Queue)
		}
		args = append(args, e.keys.Base())
	}
	res, err := engs[0].run(ctx, scriptProbe, args...)
	if err != nil {
		return nil, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) != 1+5*len(engs) {
		return nil, fmt.Errorf("srq: probe: malformed reply %v", res)
	}
	var n []int64
	for _, v := range rows {
		x, err := replyInt(v)
		if err != nil {
			return nil, fmt.Errorf("srq: probe: %w", err)
		}
		n = append(n, x)
	}
	now := n[0]
	out := make([]Due, len(engs))
	for i := range out {
		r := n[1+5*i:]
		d := Due{Expired: r[0] == 1, Upkeep: r[1] == 1, Convert: r[1] == 2, NextSchedule: -1, Outbox: int(r[3]), AbandonedFlows: r[4] == 1}
		switch {
		case r[2] < 0:
		case r[2] <= now:
			d.Schedules = true
		default:
			d.NextSchedule = time.Duration(r[2]-now) * time.Millisecond
		}
		out[i] = d
	}
	return out, nil
}
