package srq

import (
	"context"
	"sync"
	"time"

	"github.com/srqueue/srq/engine"
)

// shardWait lets one fetcher of a shard at a time wait in Redis for work; the others park until
// that wait ends, or their own wait's time is up, and then look again. A worker with two fetchers
// on one shard thus holds one blocked connection while idle, not two, and both fetch again once
// work comes.
type shardWait struct {
	eng     *engine.Engine
	mu      sync.Mutex
	waiting chan struct{} // while a fetcher waits in Redis; closed when its wait ends
}

// wait waits in Redis for up to d for work on the shard, or, while another fetcher does that,
// until its wait ends or d passes. It reports whether this call took a wake-up token, and fails
// with Engine.Wait's error or ctx's.
//
// A parked fetcher keeps its own d: it may be due sooner than the other's (a delayed task due in
// d, which this fetcher's fetch learnt of), and the fetch that learnt of it may also have dropped
// the wake-up token that would have ended the other's wait.
func (s *shardWait) wait(ctx context.Context, d time.Duration) (woken bool, err error) {
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
