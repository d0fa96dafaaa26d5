package srq

import (
	"testing"

	"github.com/srqueue/srq/engine"
)

// The adaptive prefetch starts at Concurrency and grows to 8 × Concurrency (at least 64), within
// engine.MaxFetch − Concurrency; a set Prefetch is fixed, a negative one 0 (WorkerConfig.Prefetch).
func TestPrefetchRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg    WorkerConfig
		lo, hi int
	}{
		{WorkerConfig{Concurrency: 4}, 4, 64},
		{WorkerConfig{Concurrency: 100}, 100, 800},
		{WorkerConfig{Concurrency: 2000}, 2000, engine.MaxFetch - 2000},
		{WorkerConfig{Concurrency: engine.MaxFetch / 2}, engine.MaxFetch / 2, engine.MaxFetch / 2},
		{WorkerConfig{Concurrency: 10, Prefetch: 7}, 7, 7},
		{WorkerConfig{Concurrency: 10, Prefetch: -1}, 0, 0},
	} {
		if lo, hi := tt.cfg.prefetchRange(); lo != tt.lo || hi != tt.hi {
			t.Errorf("Concurrency %d, Prefetch %d: %d to %d, want %d to %d", tt.cfg.Concurrency, tt.cfg.Prefetch, lo, hi, tt.lo, tt.hi)
		}
	}
}
