package pool

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// TestShardFetchersParkedWaitKeepsItsDueTime: a fetcher parked behind another's long wait in Redis returns
// when its own, shorter wait is up (a delayed task of its fetch is due), not when the other's ends.
func TestShardFetchersParkedWaitKeepsItsDueTime(t *testing.T) {
	t.Parallel()
	eng, err := engine.New(redistest.Client(t), engine.Config{Queue: redistest.Queue(t), MaxBlock: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &shardFetchers{eng: eng}
	ctx, cancel := context.WithCancel(context.Background())
	long := make(chan error, 1)
	go func() {
		_, err := s.wait(ctx, 10*time.Minute)
		long <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		s.mu.Lock()
		waiting := s.waiting != nil
		s.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first wait never began")
		}
		time.Sleep(time.Millisecond)
	}
	short := make(chan error, 1)
	go func() {
		woken, err := s.wait(ctx, 20*time.Millisecond)
		if woken {
			t.Error("the parked wait reports a wake-up token it did not take")
		}
		short <- err
	}()
	select {
	case err := <-short:
		if err != nil {
			t.Errorf("parked wait: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("the parked wait did not return at its own time")
	}
	cancel()
	if err := <-long; err == nil {
		t.Error("the long wait returned nil after its context ended")
	}
}

// TestShardFetchersBegin: a fetch that begins alone is not told to wait; one that begins while
// another is under way gets a channel that the end of a fetch closes.
func TestShardFetchersBegin(t *testing.T) {
	t.Parallel()
	var s shardFetchers
	if s.begin() != nil {
		t.Fatal("a fetch beginning alone is told of another under way")
	}
	other := s.begin()
	if other == nil {
		t.Fatal("a fetch beginning while another is under way is not told")
	}
	select {
	case <-other:
		t.Fatal("closed before any fetch ended")
	default:
	}
	s.end()
	select {
	case <-other:
	default:
		t.Fatal("not closed when the other fetch ended")
	}
	s.end()
	if s.begin() != nil {
		t.Fatal("a fetch beginning after both ended is told of another under way")
	}
	s.end()
}

// TestShardFetchersBackoff: the failures of a shard's fetchers share one backoff, doubled by each
// and reset by a fetch that did not fail.
func TestShardFetchersBackoff(t *testing.T) {
	t.Parallel()
	var s shardFetchers
	var got []time.Duration
	for range 9 {
		got = append(got, s.failed())
	}
	s.succeeded()
	got = append(got, s.failed())
	ms := time.Millisecond
	want := []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 50 * ms}
	if !slices.Equal(got, want) {
		t.Fatalf("backoffs %v, want %v", got, want)
	}
}
