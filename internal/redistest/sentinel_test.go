package redistest

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestSentinelFailover starts a Sentinel setup, writes through a failover client, fails over twice
// (there and back) and checks after each that the data survived, the roles swapped and both
// client kinds write to the new master.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := StartSentinel(t)
	t.Logf("sentinel setup up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := s.Client(t)
	u := s.UniversalClient(t)
	key := Queue(t)
	if err := c.Set(ctx, key, "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != s.Addrs()[0] {
		t.Fatalf("master %s, want the node started as master %s", first, s.Addrs()[0])
	}
	for round := 1; round <= 2; round++ {
		before, _ := s.Master(ctx)
		start := time.Now()
		if err := s.Failover(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("failover %d in %v", round, time.Since(start))
		after, err := s.Master(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after == before {
			t.Fatalf("failover %d: master is still %s", round, after)
		}
		if r, _ := s.Replica(ctx); r != before {
			t.Fatalf("failover %d: replica is %s, want the old master %s", round, r, before)
		}
		if n, err := c.Incr(ctx, key).Result(); err != nil || n != int64(2*round-1) {
			t.Fatalf("failover %d: INCR through the failover client: %d, %v", round, n, err)
		}
		if n, err := u.Incr(ctx, key).Result(); err != nil || n != int64(2*round) {
			t.Fatalf("failover %d: INCR through the universal client: %d, %v", round, n, err)
		}
		if v, err := s.Admin(after).Get(ctx, key).Result(); err != nil || v != strconv.Itoa(2*round) {
			t.Fatalf("failover %d: new master holds %q, %v", round, v, err)
		}
	}
}
