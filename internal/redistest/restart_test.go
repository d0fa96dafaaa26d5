package redistest

import (
	"context"
	"testing"
	"time"
)

// TestKillRestartKeepsAcknowledgedWrites: a durable server killed with SIGKILL comes back on the
// same address with every write it acknowledged, and an existing client reconnects to it.
func TestKillRestartKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	s := Start(t, DurableArgs...)
	s.NeedReal(t, "a process to kill and restart")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client(t)
	for i := 0; i < 100; i++ {
		if err := c.Incr(ctx, "n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Get(ctx, "n").Int(); err != nil || n != 100 {
		t.Fatalf("after restart: n = %d, %v; want 100", n, err)
	}
}
