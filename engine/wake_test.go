package engine

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWaitAndWake: Wait reports a timeout as not woken, takes a token Wake left (or a publish made)
// and reports it as woken; a fetch that finds nothing drops the tokens left.
func TestWaitAndWake(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if woken, err := b.eng.Wait(b.ctx, 20*time.Millisecond); err != nil || woken {
		t.Fatalf("Wait on an empty queue: woken %v, %v", woken, err)
	}
	if err := b.eng.Wake(b.ctx); err != nil {
		t.Fatal(err)
	}
	if woken, err := b.eng.Wait(b.ctx, time.Minute); err != nil || !woken {
		t.Fatalf("Wait after Wake: woken %v, %v", woken, err)
	}
	b.publish(Message{ID: "a"})
	if woken, err := b.eng.Wait(b.ctx, time.Minute); err != nil || !woken {
		t.Fatalf("Wait after a publish: woken %v, %v", woken, err)
	}
	if err := b.eng.Wake(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.ack(b.fetch("c", 1)...)
	if len(b.fetch("c", 1)) != 0 {
		t.Fatal("a task left")
	}
	if n, err := b.client.LLen(b.ctx, b.eng.Keys().Wake()).Result(); err != nil || n != 0 {
		t.Fatalf("%d wake-up tokens left after an empty fetch, %v", n, err)
	}
}

// TestWaitUnderShortReadTimeout: a client whose ReadTimeout is not above a second (go-redis reads
// a fractional BLPOP's reply within it) still waits the whole time without errors, in Wait and in
// FetchWait, and is still woken by a publish.
func TestWaitUnderShortReadTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.server.NeedReal(t, "a 200ms read timeout, which the embedded Redis under -race does not always answer within")
	opt := b.server.Options()
	opt.ReadTimeout = 200 * time.Millisecond
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	e, err := New(c, b.eng.Config())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if woken, err := e.Wait(b.ctx, 900*time.Millisecond); err != nil || woken {
		t.Fatalf("Wait on an empty queue: woken %v, %v", woken, err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("Wait returned after %v, before its 900ms", took)
	}
	if ds, err := e.FetchWait(b.ctx, "c", 1, time.Minute, 700*time.Millisecond); err != nil || len(ds) != 0 {
		t.Fatalf("FetchWait on an empty queue: %d tasks, %v", len(ds), err)
	}
	b.publish(Message{ID: "a"})
	if woken, err := e.Wait(b.ctx, 900*time.Millisecond); err != nil || !woken {
		t.Fatalf("Wait after a publish: woken %v, %v", woken, err)
	}
}
