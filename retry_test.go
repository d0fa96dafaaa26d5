package srq_test

import (
	"math"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// TestExponentialBackoff: each wait is base doubled per failed attempt, capped at limit, within
// ±20 % jitter, and a limit near the largest Duration does not overflow the doubling into 0 s.
func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		base, limit time.Duration
		attempt     int
		want        time.Duration // before jitter
	}{
		{"first attempt", time.Second, 10 * time.Minute, 1, time.Second},
		{"doubles", time.Second, 10 * time.Minute, 4, 8 * time.Second},
		{"capped", time.Second, 10 * time.Minute, 30, 10 * time.Minute},
		{"many attempts", time.Second, 10 * time.Minute, 1_000_000, 10 * time.Minute},
		{"no overflow near the largest limit", time.Second, math.MaxInt64, 100, math.MaxInt64},
		{"a limit below base wins", 10 * time.Second, time.Second, 3, time.Second},
		{"a zero limit retries at once", time.Second, 0, 5, 0},
		{"a negative base is 0", -time.Second, time.Minute, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			policy := srq.ExponentialBackoff(tc.base, tc.limit)
			for range 100 { // the jitter is random: every draw must be in range
				got := policy(tc.attempt, nil)
				low := time.Duration(float64(tc.want) * 0.8)
				high := time.Duration(math.MaxInt64)
				if h := float64(tc.want) * 1.2; h < math.MaxInt64 { // 2^63: no Duration is that long
					high = time.Duration(h)
				}
				if got < low || got > high || got < 0 {
					t.Fatalf("attempt %d: %v, want %v ±20%% (%v…%v)", tc.attempt, got, tc.want, low, high)
				}
			}
		})
	}
}
