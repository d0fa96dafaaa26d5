package srq

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how long a task waits before its next attempt after its handler failed with an
// ordinary error; attempt is the attempt that failed, from 1.
type RetryPolicy func(attempt int, err error) time.Duration

// ExponentialBackoff returns a policy that waits base, 2×base, 4×base, … up to limit, each wait
// spread by ±20% jitter so failed tasks do not return in lockstep (a wait at the limit too: it
// lies within ±20% of it). The limit wins over base: with a limit below base every wait is the
// limit ±20%, and with a limit of 0 (or a negative base) every retry is at once.
func ExponentialBackoff(base, limit time.Duration) RetryPolicy {
	limit = max(limit, 0)
	base = min(max(base, 0), limit)
	return func(attempt int, _ error) time.Duration {
		d := base
		for i := 1; i < attempt && d > 0 && d < limit; i++ {
			if d > limit/2 { // doubling would pass limit, or overflow near the largest Duration
				d = limit
				break
			}
			d *= 2
		}
		d = min(d, limit)
		jitter := time.Duration(float64(d) * 0.2 * (2*rand.Float64() - 1))
		if jitter > 0 && d > math.MaxInt64-jitter {
			return math.MaxInt64
		}
		return max(d+jitter, 0)
	}
}

// DefaultRetryPolicy waits 1s, 2s, 4s, … up to 10 minutes, each wait spread by ±20% jitter (so a
// capped wait lies between 8 and 12 minutes).
var DefaultRetryPolicy = ExponentialBackoff(time.Second, 10*time.Minute)
