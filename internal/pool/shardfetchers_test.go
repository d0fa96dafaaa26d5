package pool

import (
	"context"
	"errors"
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
		_, err := s.wait(ctx, 10*time.Minute, false)
		long <- err
	}()
	waitInRedis(t, s)
	short := make(chan error, 1)
	go func() {
		woken, err := s.wait(ctx, 20*time.Millisecond, true)
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

// waitUntil waits until cond, read with s.mu held, holds.
func waitUntil(t *testing.T, s *shardFetchers, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what + " never happened")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitInRedis waits until a fetcher of s waits in Redis.
func waitInRedis(t *testing.T, s *shardFetchers) {
	t.Helper()
	waitUntil(t, s, "a wait in Redis", func() bool { return s.waiting })
}

// TestShardFetchersParkedUntilWork: a fetcher parked behind another's wait in Redis, with no due
// time of its own, stays parked when that wait ends without work and through the waits in Redis
// after it (whose fetcher fetches after each: a second fetch would find the same), and returns
// when a fetch of the shard found tasks (busy) or when a wait took a wake-up token.
func TestShardFetchersParkedUntilWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eng, err := engine.New(redistest.Client(t), engine.Config{Queue: redistest.Queue(t), MaxBlock: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &shardFetchers{eng: eng}
	// park starts a fetcher's wait behind the wait in Redis under way and returns once it parked.
	park := func() chan error {
		waitInRedis(t, s)
		done := make(chan error, 1)
		go func() {
			woken, err := s.wait(ctx, time.Minute, false)
			if woken {
				err = errors.New("the parked wait reports a wake-up token it did not take")
			}
			done <- err
		}()
		waitUntil(t, s, "parking", func() bool { return s.idle != nil })
		return done
	}
	// inRedis starts a wait in Redis of up to a minute; it ends with its context, or a token.
	inRedis := func(ctx context.Context) chan bool {
		woken := make(chan bool, 1)
		go func() {
			w, _ := s.wait(ctx, time.Minute, false)
			woken <- w
		}()
		return woken
	}

	waitCtx, endWait := context.WithCancel(ctx)
	first := inRedis(waitCtx)
	done := park()
	endWait()
	<-first
	for range 3 { // the next waits in Redis, as the other fetcher makes them after its fetches
		if woken, err := s.wait(ctx, 20*time.Millisecond, false); err != nil || woken {
			t.Fatalf("an empty wait in Redis: woken %v, %v", woken, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the parked fetcher returned when the waits in Redis ended without work (%v)", err)
	default:
	}
	s.busy()
	returned(t, done, "after busy")

	woken := inRedis(ctx)
	done = park()
	if err := eng.Wake(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-woken:
		if !w {
			t.Error("the wait in Redis returned without the wake-up token")
		}
	case <-time.After(time.Minute):
		t.Fatal("the wait in Redis did not return after a wake-up")
	}
	returned(t, done, "after a wait took a wake-up token")
}

// returned fails t unless the parked wait done returns nil within a minute.
func returned(t *testing.T, done chan error, when string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the parked wait %s: %v", when, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the parked wait did not return %s", when)
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
