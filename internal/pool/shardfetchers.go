package pool

import (
	"context"
	"sync"
	"time"

	"github.com/srqueue/srq/engine"
)

// shardFetchers is what the fetchers of one shard share: which of them waits in Redis for work,
// how many fetch now, and the backoff after failed fetches.
//
// One fetcher at a time waits in Redis; the others park until that wait ends, or their own wait's
// time is up, and then look again. A worker with two fetchers on one shard thus holds one blocked
// connection while idle, not two, and both fetch again once work comes.
//
// A fetch that begins while another is under way is told so (begin), and waits until it holds
// half of all slots, or the other returns (runner.fetchFree): two calls in flight keep Redis busy,
// and the second one waiting for half the slots keeps them large, where taking whatever was free
// at once made them small.
type shardFetchers struct {
	eng      *engine.Engine
	mu       sync.Mutex
	waiting  chan struct{} // while a fetcher waits in Redis; closed when its wait ends
	fetching int           // fetches under way (between begin and end)
	fetched  chan struct{} // made by a begin that found a fetch under way; closed by the next end
	backoff  time.Duration // the wait after the last failed fetch; 0 after a fetch that did not fail
}

// failed returns how long a fetcher waits after its fetch failed: the shard's backoff, doubled by
// every failure of any of its fetchers (50ms, 100ms, … 5s), so that two fetchers of a shard that
// cannot be reached try about as often as one would.
func (s *shardFetchers) failed() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backoff = min(max(2*s.backoff, 50*time.Millisecond), 5*time.Second)
	return s.backoff
}

// probing says whether the shard's last fetch failed: its next fetch is a probe (fetchLoop).
func (s *shardFetchers) probing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backoff > 0
}

// succeeded resets the backoff after a fetch that did not fail.
func (s *shardFetchers) succeeded() {
	s.mu.Lock()
	s.backoff = 0
	s.mu.Unlock()
}

// begin notes a fetch beginning. While another fetch is under way it returns a channel closed when
// one of the fetches under way ends; else nil.
func (s *shardFetchers) begin() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	var other chan struct{}
	if s.fetching > 0 {
		if s.fetched == nil {
			s.fetched = make(chan struct{})
		}
		other = s.fetched
	}
	s.fetching++
	return other
}

// end notes that a fetch that began has returned.
func (s *shardFetchers) end() {
	s.mu.Lock()
	s.fetching--
	if s.fetched != nil {
		close(s.fetched)
		s.fetched = nil
	}
	s.mu.Unlock()
}

// wait waits in Redis for up to d for work on the shard, or, while another fetcher does that,
// until its wait ends or d passes. It reports whether this call took a wake-up token, and fails
// with Engine.Wait's error or ctx's.
//
// A parked fetcher keeps its own d: it may be due sooner than the other's (a delayed task due in
// d, which this fetcher's fetch learnt of), and the fetch that learnt of it may also have dropped
// the wake-up token that would have ended the other's wait.
func (s *shardFetchers) wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	s.mu.Lock()
	if ch := s.waiting; ch != nil {
		s.mu.Unlock()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		return false, nil
	}
	ch := make(chan struct{})
	s.waiting = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting = nil
		close(ch)
		s.mu.Unlock()
	}()
	return s.eng.Wait(ctx, d)
}
