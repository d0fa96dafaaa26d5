package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

func TestDelayFollowsServerTime(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const delay = 300 * time.Millisecond
	before := b.serverNow()
	b.publish(Message{ID: "later", Delay: delay})
	if ds := b.fetch("c", 1); len(ds) != 0 {
		t.Fatalf("a delayed task was delivered at once: %+v", ds)
	}
	ds, err := b.eng.FetchWait(b.ctx, "c", 1, time.Minute, 10*time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("FetchWait: %v %v", ds, err)
	}
	if got := b.serverNow(); got.Before(before.Add(delay)) {
		t.Fatalf("delivered at server time %v, before it was due (%v)", got, before.Add(delay))
	}
	if !ds[0].AvailableAt.After(before) || ds[0].AvailableAt.Sub(ds[0].EnqueuedAt) != delay {
		t.Fatalf("available-at %v enqueued-at %v", ds[0].AvailableAt, ds[0].EnqueuedAt)
	}
}

func TestAbsoluteTime(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	now := b.serverNow()
	b.publish(Message{ID: "future", At: now.Add(time.Hour)}, Message{ID: "past", At: now.Add(-time.Hour)})
	assertOrder(t, b.drain("c"), []string{"past"})
	ti, err := b.eng.Task(b.ctx, "future")
	if err != nil || !ti.AvailableAt.Equal(now.Add(time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("%+v %v", ti, err)
	}
}

func TestRejectWithDelayBlocksOnlyThatOrderedPartition(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	a, other := partition.Ordered("a"), partition.Ordered("b")
	b.publish(Message{ID: "a1", Partition: a}, Message{ID: "a2", Partition: a},
		Message{ID: "b1", Partition: other}, Message{ID: "u1", Partition: "u"})
	first := b.fetch("c", 1)
	if len(first) != 1 || first[0].ID != "a1" {
		t.Fatalf("fetch %+v", first)
	}
	res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: first[0].Receipt(), Delay: time.Hour, Reason: "429"}})
	if err != nil || res[0].Err != nil {
		t.Fatal(res, err)
	}
	got := b.drain("c")
	assertOrder(t, got, []string{"b1", "u1"})
	// a1 kept its place at the head and a is blocked for the hour; a2 waits behind it.
	score, err := b.client.ZScore(b.ctx, b.eng.Keys().Sched(), string(a)).Result()
	if err != nil || score < float64(b.serverNow().Add(59*time.Minute).UnixMilli()) {
		t.Fatalf("partition a scheduled at %v (%v), want about an hour ahead", score, err)
	}
	members, _ := b.client.ZRange(b.ctx, b.eng.Keys().Pending(a, 0), 0, -1).Result()
	if len(members) != 2 || members[0][20:] != "a1" || members[1][20:] != "a2" {
		t.Fatalf("pending of a: %v", members)
	}
}

func TestRejectUnorderedReentersLater(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "u1", Partition: "u"}, Message{ID: "u2", Partition: "u"})
	first := b.fetch("c", 1)
	if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: first[0].Receipt(), Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	assertOrder(t, b.drain("c"), []string{"u2"})
	ti, err := b.eng.Task(b.ctx, "u1")
	if err != nil || ti.State != StatePending || ti.AvailableAt.Before(b.serverNow().Add(59*time.Minute)) {
		t.Fatalf("%+v %v", ti, err)
	}
}

func TestRejectNotAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "t", MaxAttempts: 1})
	for i := 0; i < 3; i++ {
		ds := b.fetch("c", 1)
		if len(ds) != 1 || ds[0].Attempt != 1 {
			t.Fatalf("round %d: %+v", i, ds)
		}
		res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), NotAttempt: true, Reason: "rate limited"}})
		if err != nil || res[0].Err != nil || res[0].DeadLettered {
			t.Fatalf("round %d: %+v %v", i, res, err)
		}
	}
}

// TestFetchWaitWakes: a fetcher blocked in Redis (one block slice of 30s) returns as soon as a
// publish makes work ready, or is woken to wait for a delayed task due earlier than anything it
// knew of. Each case runs on a server of its own to see its blocked client.
func TestFetchWaitWakes(t *testing.T) {
	t.Parallel()
	for _, m := range []Message{{ID: "now"}, {ID: "soon", Delay: 200 * time.Millisecond}} {
		t.Run(m.ID, func(t *testing.T) {
			t.Parallel()
			ctx, e, c := wakeEngine(t)
			got := fetchWaitBlocked(ctx, t, e, c)
			if _, err := e.Publish(ctx, []Message{m}); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-got:
				if r.err != nil || len(r.ds) != 1 || r.ds[0].ID != m.ID {
					t.Fatalf("%+v %v", r.ds, r.err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the blocked fetcher was not woken")
			}
		})
	}
}

// wakeEngine returns an engine whose FetchWait blocks in one slice of 30s, on a redis-server of
// its own, so that fetchWaitBlocked can see its blocked client; with its client and a context.
func wakeEngine(t *testing.T) (context.Context, *Engine, *redis.Client) {
	t.Helper()
	c := redistest.StartReal(t, "counts its blocked clients").Client(t)
	e, err := New(c, Config{Queue: "wake", MaxBlock: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, e, c
}

// fetchResult is what a FetchWait returned.
type fetchResult struct {
	ds  []Delivery
	err error
}

// fetchWaitBlocked starts a FetchWait of one task on e (waiting up to 50s) and returns once the
// server, which must serve no other client that blocks, counts it as a blocked client; the
// channel gets what it returns.
func fetchWaitBlocked(ctx context.Context, t *testing.T, e *Engine, c *redis.Client) <-chan fetchResult {
	t.Helper()
	got := make(chan fetchResult, 1)
	go func() {
		ds, err := e.FetchWait(ctx, "c", 1, time.Minute, 50*time.Second)
		got <- fetchResult{ds, err}
	}()
	for blocked := false; !blocked; {
		info, err := c.Info(ctx, "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		blocked = strings.Contains(info, "blocked_clients:1")
		if !blocked {
			time.Sleep(5 * time.Millisecond) // polling a condition, with the test's deadline
		}
	}
	return got
}

func TestFetchWaitTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxBlock: 50 * time.Millisecond})
	ds, err := b.eng.FetchWait(b.ctx, "c", 1, time.Minute, 120*time.Millisecond)
	if err != nil || len(ds) != 0 {
		t.Fatalf("timeout: %v %v", ds, err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.eng.FetchWait(ctx, "c", 1, time.Minute, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
