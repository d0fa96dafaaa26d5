package pool

import (
	"testing"
	"time"
)

// TestPrefetcher: the adaptive prefetch follows what the handlers finish in prefetchRoundTrips
// round trips, within its bounds, and starts small again after an idle spell.
func TestPrefetcher(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		perFetch int           // handlers finished between two fetches
		every    time.Duration // time between two fetches
		rtt      time.Duration // how long each fetch takes
		want     int
	}{
		{"slow handlers keep the floor", 8, 4 * time.Millisecond, 100 * time.Microsecond, 8},
		{"fast handlers reach the ceiling", 30, 500 * time.Microsecond, 800 * time.Microsecond, 64},
		// 40,000 tasks/s × 250 µs × 2 = 20
		{"between the bounds", 20, 500 * time.Microsecond, 250 * time.Microsecond, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newPrefetcher(8, 64, make(chan struct{}, 64))
			if got := f.prefetch(); got != 8 {
				t.Fatalf("a new prefetcher's prefetch is %d, want its floor 8", got)
			}
			now := time.Unix(1_700_000_000, 0)
			for range 50 {
				for range tc.perFetch {
					f.done.Add(1)
				}
				now = now.Add(tc.every)
				f.fetched(now.Add(-tc.rtt), now)
			}
			if got := f.prefetch(); got != tc.want {
				t.Errorf("prefetch %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("idle spell", func(t *testing.T) {
		t.Parallel()
		f := newPrefetcher(8, 64, make(chan struct{}, 64))
		now := time.Unix(1_700_000_000, 0)
		for range 50 {
			f.done.Add(30)
			now = now.Add(500 * time.Microsecond)
			f.fetched(now.Add(-800*time.Microsecond), now)
		}
		if f.prefetch() != 64 {
			t.Fatalf("prefetch %d before the idle spell, want 64", f.prefetch())
		}
		// A minute without work, then a fetch: the rate since the last fetch is about 0.
		now = now.Add(time.Minute)
		f.fetched(now.Add(-800*time.Microsecond), now)
		if got := f.prefetch(); got != 8 {
			t.Errorf("prefetch %d after an idle spell, want the floor 8", got)
		}
	})
}

// TestPrefetcherSlots: the slots in circulation follow the prefetch: the ones it grows by are put
// in at once, and those it shrinks by are kept as handlers give them back, never taken from a
// fetcher.
func TestPrefetcherSlots(t *testing.T) {
	t.Parallel()
	const concurrency, lo, hi = 4, 4, 32
	slots := make(chan struct{}, concurrency+hi)
	for range concurrency + lo {
		slots <- struct{}{}
	}
	f := newPrefetcher(lo, hi, slots)
	now := time.Unix(1_700_000_000, 0)
	step := func(finished int, rtt time.Duration) {
		f.done.Add(int64(finished))
		now = now.Add(time.Millisecond)
		f.fetched(now.Add(-rtt), now)
	}
	// Fast: 32 tasks a ms × 2 ms × 2 round trips: the ceiling.
	for range 20 {
		step(32, 2*time.Millisecond)
	}
	if got, want := len(slots), concurrency+hi; got != want || f.prefetch() != hi {
		t.Fatalf("grown to prefetch %d: %d slots free, want %d", f.prefetch(), got, want)
	}
	// A fetcher takes every slot, and the handlers slow down: the prefetch falls to its floor,
	// but no slot is taken from the fetcher; they are kept as the handlers give them back.
	for range concurrency + hi {
		<-slots
	}
	f.last = time.Time{} // measure afresh
	for range 20 {
		step(0, 100*time.Microsecond)
	}
	if f.prefetch() != lo {
		t.Fatalf("prefetch %d after the handlers slowed, want %d", f.prefetch(), lo)
	}
	for range concurrency + hi {
		f.give()
	}
	if got, want := len(slots), concurrency+lo; got != want {
		t.Errorf("after every slot came back: %d in circulation, want %d", got, want)
	}
}
