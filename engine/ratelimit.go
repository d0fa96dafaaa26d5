package engine

import (
	"context"
	"fmt"
	"time"
)

// Rate is a rate limit: Limit units per Per, with bursts of up to Burst units (default 1: evenly
// spaced). Allow takes a Limit of at least 1 and a Per of at least 1ms (the zero Rate is invalid
// there; middleware.RateLimit reads it as no limit and asks nothing).
type Rate struct {
	Limit int
	Per   time.Duration
	Burst int
}

// Limit is one named rate limit to check, such as one per partition and one per queue.
type Limit struct {
	Name string
	Rate Rate
}

func (r Rate) validate() error {
	switch {
	case r.Limit < 1:
		return fmt.Errorf("limit %d is below 1", r.Limit)
	case r.Per < time.Millisecond:
		return fmt.Errorf("period %v is below 1ms", r.Per)
	case r.Burst < 0:
		return fmt.Errorf("negative burst %d", r.Burst)
	}
	return nil
}

// Allow asks every limit in ls for one unit of work, atomically and on the server's clock (GCRA).
// It returns 0 when all allow it (and charges each), else how long until all would, charging none.
// It fails with ErrInvalid for an invalid limit or a name given twice, and with the context's or
// Redis's error.
func (e *Engine) Allow(ctx context.Context, ls ...Limit) (time.Duration, error) {
	wait, _, err := e.allowAt(ctx, 0, ls)
	return wait, err
}

// allowAt is Allow at a given server time in ms (0: the server's clock); it also returns the time
// the script used. Tests use it to check the delays exactly.
func (e *Engine) allowAt(ctx context.Context, nowMs int64, ls []Limit) (time.Duration, int64, error) {
	if len(ls) == 0 {
		return 0, 0, nil
	}
	args := make([]any, 0, 1+4*len(ls))
	args = append(args, nowMs)
	for i, l := range ls {
		if err := l.Rate.validate(); err != nil {
			return 0, 0, fmt.Errorf("%w: limit %d (%q): %w", ErrInvalid, i, l.Name, err)
		}
		// The script would charge a name once however often it is named: refuse rather than
		// charge less than asked.
		for _, earlier := range ls[:i] {
			if earlier.Name == l.Name {
				return 0, 0, fmt.Errorf("%w: limit %d: the name %q is named twice", ErrInvalid, i, l.Name)
			}
		}
		args = append(args, l.Name, l.Rate.Limit, l.Rate.Per.Milliseconds(), max(l.Rate.Burst, 1))
	}
	res, err := e.run(ctx, scriptRateLimit, args...)
	if err != nil {
		return 0, 0, err
	}
	rows, err := replySlice(res)
	if err != nil || len(rows) != 3 {
		return 0, 0, fmt.Errorf("srq: rate limit: malformed reply %v", res)
	}
	wait, err := replyInt(rows[1])
	if err != nil {
		return 0, 0, err
	}
	now, err := replyInt(rows[2])
	return time.Duration(wait) * time.Millisecond, now, err
}
