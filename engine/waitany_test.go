package engine

import (
	"errors"
	"testing"
	"time"
)

// TestWaitAny: one blocking call waits for several queues of one client and says which was woken;
// it returns -1 when its time is up, and refuses engines it cannot wait for together.
func TestWaitAny(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxBlock: 200 * time.Millisecond})
	second, err := New(b.client, Config{Queue: b.eng.Config().Queue + "-2", MaxBlock: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	engs := []*Engine{b.eng, second}
	if !CanWaitTogether(b.eng, second) {
		t.Fatal("two queues of one single-node client cannot be waited for together")
	}

	// A wait whose time is up: in slices of the first engine's MaxBlock, then -1.
	start := time.Now()
	if i, err := WaitAny(b.ctx, engs, 450*time.Millisecond); i != -1 || err != nil {
		t.Fatalf("WaitAny with no wake-up = %d, %v", i, err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("WaitAny returned after %v, before its 450ms", d)
	}

	// A publish to the second queue wakes it.
	done := make(chan int, 1)
	go func() {
		i, err := WaitAny(b.ctx, engs, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- i
	}()
	if _, err := second.Publish(b.ctx, []Message{{Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case i := <-done:
		if i != 1 {
			t.Errorf("WaitAny woke for engine %d, want 1", i)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a publish did not wake WaitAny")
	}

	// Another client's queue is waited for apart.
	other, err := New(b.server.Client(t), Config{Queue: b.eng.Config().Queue + "-3"})
	if err != nil {
		t.Fatal(err)
	}
	if CanWaitTogether(b.eng, other) {
		t.Error("queues of two clients can be waited for together")
	}
	if _, err := WaitAny(b.ctx, []*Engine{b.eng, other}, time.Millisecond); !errors.Is(err, ErrInvalid) {
		t.Errorf("WaitAny over two clients = %v, want ErrInvalid", err)
	}
	if _, err := WaitAny(b.ctx, nil, time.Millisecond); !errors.Is(err, ErrInvalid) {
		t.Errorf("WaitAny over no engine = %v, want ErrInvalid", err)
	}
}
