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
// One fetcher at a time waits in Redis, and fetches again when its wait ends; the others park
// until the shard may have work: that wait took a wake-up token, or a fetch of the shard found
// tasks (busy), or delayed work a parked fetcher learnt of is due. A worker with two fetchers on
// one shard thus holds one blocked connection while idle, not two, and makes one fetch each
// PollWait, not two; both fetch again once work comes.
//
// A fetch that begins while another is under way is told so (begin), and waits until it holds
// half of all slots, or the other returns (runner.fetchFree): two calls in flight keep Redis busy,
// and the second one waiting for half the slots keeps them large, where taking whatever was free
// at once made them small.
type shardFetchers struct {
	eng      *engine.Engine
	mu       sync.Mutex
	waiting  bool          // a fetcher waits in Redis
	idle     chan struct{} // made by a fetcher that parks; closed when the shard may have work
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
// parks until the shard may have work (see shardFetchers) or, when due is set, until d passes. It
// reports whether this call took a wake-up token, and fails with Engine.Wait's error or ctx's.
//
// due says that d is when delayed work this fetcher's fetch learnt of is due: a parked fetcher
// keeps that time, which may be sooner than the other's, whose fetch may not have seen the work
// (and the fetch that learnt of it may have dropped the wake-up token that would have ended the
// other's wait). Without it, a parked fetcher stays parked when the other's wait ends empty: the
// other fetches then, and a second fetch would find what the first found.
func (s *shardFetchers) wait(ctx context.Context, d time.Duration, due bool) (woken bool, err error) {
	s.mu.Lock()
	if s.waiting {
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle := s.idle
		s.mu.Unlock()
		var until <-chan time.Time
		if due {
			t := time.NewTimer(d)
			defer t.Stop()
			until = t.C
		}
		select {
		case <-idle:
		case <-until:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		return false, nil
	}
	s.waiting = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting = false
		if woken {
			s.workLocked()
		}
		s.mu.Unlock()
	}()
	return s.eng.Wait(ctx, d)
}

// busy notes that a fetch of the shard found tasks: fetchers parked in wait fetch again.
func (s *shardFetchers) busy() {
	s.mu.Lock()
	s.workLocked()
	s.mu.Unlock()
}

// workLocked ends the parking of the fetchers parked in wait. Called with mu held.
func (s *shardFetchers) workLocked() {
	if s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}
