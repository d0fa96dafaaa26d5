package engine

import (
	"errors"
	"testing"
	"time"
)

// TestRateLimitDelaysAreExact drives the limiter with explicit server times: the delays it hands
// back follow GCRA to the millisecond.
func TestRateLimitDelaysAreExact(t *testing.T) {
	t.Parallel()
	type ask struct {
		now  int64
		wait time.Duration // 0: allowed
	}
	cases := []struct {
		name string
		rate Rate
		asks []ask
	}{
		{"2 per second, evenly spaced", Rate{Limit: 2, Per: time.Second}, []ask{
			{1000, 0}, {1000, 500 * time.Millisecond}, {1200, 300 * time.Millisecond}, {1500, 0}, {1600, 400 * time.Millisecond}, {5000, 0},
		}},
		{"3 per second, burst 3", Rate{Limit: 3, Per: time.Second, Burst: 3}, []ask{
			{0, 0}, {0, 0}, {0, 0}, {0, 334 * time.Millisecond}, {334, 0}, {334, 333 * time.Millisecond},
		}},
		{"1 per minute", Rate{Limit: 1, Per: time.Minute}, []ask{
			{10_000, 0}, {10_001, 59_999 * time.Millisecond}, {70_000, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			base := b.serverNow().UnixMilli() // keep the keys' expiry in the future
			for i, a := range tc.asks {
				wait, now, err := b.eng.allowAt(b.ctx, base+a.now, []Limit{{Name: "p", Rate: tc.rate}})
				if err != nil || now != base+a.now {
					t.Fatalf("ask %d: %v (now %d)", i, err, now)
				}
				if wait != a.wait {
					t.Fatalf("ask %d at +%dms: wait %v, want %v", i, a.now, wait, a.wait)
				}
			}
		})
	}
}

// TestRateLimitAllOrNothing: with a partition limit and a queue limit, a unit is charged to both or
// to neither, and one partition over its limit leaves another partition's limit untouched.
func TestRateLimitAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	now := b.serverNow().UnixMilli()
	perSecond := Rate{Limit: 1, Per: time.Second}
	queue := Limit{Name: "queue", Rate: Rate{Limit: 10, Per: time.Second, Burst: 10}}
	a := []Limit{{Name: "p:a", Rate: perSecond}, queue}
	c := []Limit{{Name: "p:c", Rate: perSecond}, queue}
	for i, step := range []struct {
		ls   []Limit
		wait time.Duration
	}{{a, 0}, {a, time.Second}, {a, time.Second}, {c, 0}} {
		wait, _, err := b.eng.allowAt(b.ctx, now, step.ls)
		if err != nil || wait != step.wait {
			t.Fatalf("step %d: wait %v, %v; want %v", i, wait, err, step.wait)
		}
	}
	// The queue limit was charged twice (a once, c once), not by a's refused asks: 8 are left.
	for i := 0; i < 8; i++ {
		if wait, _, _ := b.eng.allowAt(b.ctx, now, []Limit{queue}); wait != 0 {
			t.Fatalf("queue ask %d refused: %v", i, wait)
		}
	}
	if wait, _, _ := b.eng.allowAt(b.ctx, now, []Limit{queue}); wait != 100*time.Millisecond {
		t.Fatalf("11th queue ask: wait %v", wait)
	}
}

func TestRateLimitInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, r := range []Rate{{Limit: 0, Per: time.Second}, {Limit: 1, Per: 0}, {Limit: 1, Per: time.Second, Burst: -1}} {
		if _, err := b.eng.Allow(b.ctx, Limit{Name: "x", Rate: r}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	// A name given twice would be charged once.
	r := Rate{Limit: 1, Per: time.Second}
	if _, err := b.eng.Allow(b.ctx, Limit{Name: "x", Rate: r}, Limit{Name: "y", Rate: r}, Limit{Name: "x", Rate: r}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a name twice: %v", err)
	}
}
