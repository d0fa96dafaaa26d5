package engine

import (
	"context"
	"fmt"
)

// Recovered counts what one Recover call did.
type Recovered struct {
	Returned     int  // tasks back in pending
	DeadLettered int  // tasks that had used their attempts
	More         bool // more expired leases may be waiting: call again
}

// Recover returns tasks whose lease expired, at most Config.RecoverChunk leases a call. Ordered
// tasks go back to their exact position, together with every other leased task of their
// partition, so the old holder keeps nothing. Each returned task counts a crash, and an attempt
// unless Config.CrashIsNotAttempt. It is idempotent and needs no lock: every consumer may run it.
// It fails with the context's or Redis's error.
func (e *Engine) Recover(ctx context.Context) (Recovered, error) {
	counts := 1
	if e.cfg.CrashIsNotAttempt {
		counts = 0
	}
	count, age := e.deadCaps()
	res, err := e.run(ctx, scriptRecover, e.cfg.RecoverChunk, counts, count, age)
	if err != nil {
		return Recovered{}, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) != 3 {
		return Recovered{}, fmt.Errorf("srq: recover: malformed reply %v", res)
	}
	var n [3]int64
	for i := range n {
		if n[i], err = replyInt(rows[i]); err != nil {
			return Recovered{}, err
		}
	}
	return Recovered{Returned: int(n[0]), DeadLettered: int(n[1]), More: n[2] == 1}, nil
}

// RecoverAll calls Recover until no expired lease is left or ctx ends, and returns the sums. It
// fails with the context's or Redis's error, and then also returns the sums of the calls before.
func (e *Engine) RecoverAll(ctx context.Context) (Recovered, error) {
	var total Recovered
	for {
		r, err := e.Recover(ctx)
		total.Returned += r.Returned
		total.DeadLettered += r.DeadLettered
		if err != nil || !r.More {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
