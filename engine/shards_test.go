package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// TestShardQueueSpreadsOverSlots: shard i's hash tag lies in the i-th of n equal slot ranges, so
// an evenly split cluster gets the same number of shards on every master; names are distinct.
func TestShardQueueSpreadsOverSlots(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 6, 16, engine.MaxShards} {
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			name := engine.ShardQueue("orders", n, i)
			if seen[name] || !strings.HasPrefix(name, fmt.Sprintf("orders#%d.", i)) {
				t.Fatalf("n=%d: shard %d is named %q", n, i, name)
			}
			seen[name] = true
			k, err := engine.NewKeys("srq", name)
			if err != nil {
				t.Fatal(err)
			}
			slot := redistest.KeySlot(k.Ready())
			if lo, hi := i*16384/n, (i+1)*16384/n; slot < lo || slot >= hi {
				t.Fatalf("n=%d: shard %d (%s) is in slot %d, outside [%d, %d)", n, i, name, slot, lo, hi)
			}
		}
	}
	if got := engine.ShardQueue("orders", 1, 0); got != "orders" {
		t.Fatalf("one shard is named %q, want the queue's name", got)
	}
}

// TestShardOfSpreads: partitions spread over the shards roughly evenly, and a key's shard never
// changes.
func TestShardOfSpreads(t *testing.T) {
	t.Parallel()
	const n, keys = 8, 80000
	counts := make([]int, n)
	for i := 0; i < keys; i++ {
		k := partition.Key(fmt.Sprintf("user-%d", i))
		s := engine.ShardOf(k, n)
		if s != engine.ShardOf(k, n) {
			t.Fatal("ShardOf is not stable")
		}
		counts[s]++
	}
	for i, c := range counts {
		if c < keys/n*9/10 || c > keys/n*11/10 {
			t.Fatalf("shard %d got %d of %d keys: %v", i, c, keys, counts)
		}
	}
}

// panicOf runs f and returns what it panicked with, "" when it returned; it fails t when f is
// still running after 10 s, as a search that never ends would be.
func panicOf(t *testing.T, f func()) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprint(r)
				return
			}
			done <- ""
		}()
		f()
	}()
	select {
	case msg := <-done:
		return msg
	case <-time.After(10 * time.Second):
		t.Fatal("still running after 10s")
		return ""
	}
}

// TestShardQueueAndShardOfCheckInputs: a shard outside [0, n) or a count outside [1, MaxShards]
// panics with a message saying so, where ShardQueue searched for ever (no slot range for shard
// n, or for most shards of more than 16,384) and ShardOf answered shard 0 of no shards.
func TestShardQueueAndShardOfCheckInputs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, i int }{
		{4, 4}, {4, -1}, {20000, 0}, {engine.MaxShards + 1, 0}, {math.MaxInt, 0}, {0, 1}, {-1, 0}, {1, 1}, {1, -1},
	} {
		if msg := panicOf(t, func() { engine.ShardQueue("q", c.n, c.i) }); !strings.Contains(msg, "outside") {
			t.Errorf("ShardQueue(q, %d, %d) panicked with %q, want a message saying what is outside its range", c.n, c.i, msg)
		}
	}
	for _, n := range []int{-1, engine.MaxShards + 1, math.MinInt} {
		if msg := panicOf(t, func() { engine.ShardOf("p", n) }); !strings.Contains(msg, "outside") {
			t.Errorf("ShardOf(p, %d) panicked with %q, want a message saying the count is outside its range", n, msg)
		}
	}
	// The limits themselves are accepted, and 0 means 1, as QueueConfig.Shards does.
	if got := engine.ShardQueue("q", 0, 0); got != "q" {
		t.Errorf("ShardQueue(q, 0, 0) = %q, want q", got)
	}
	if s := engine.ShardOf("p", 0); s != 0 {
		t.Errorf("ShardOf(p, 0) = %d", s)
	}
	if got := engine.ShardQueue("q", engine.MaxShards, engine.MaxShards-1); !strings.HasPrefix(got, fmt.Sprintf("q#%d.", engine.MaxShards-1)) {
		t.Errorf("last shard of MaxShards is named %q", got)
	}
	if s := engine.ShardOf("p", 1); s != 0 {
		t.Errorf("ShardOf(p, 1) = %d", s)
	}
	if s := engine.ShardOf("p", engine.MaxShards); s < 0 || s >= engine.MaxShards {
		t.Errorf("ShardOf(p, MaxShards) = %d", s)
	}
}

// TestValidateQueueName: a queue name with a control character (C0, DEL, C1) is refused with
// ErrInvalid, as one with the shard separator is; other text, bidirectional controls and emoji
// included, is a valid name.
func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"emails", "a:b", "* q", "日本 🔑", "q\u202e", "q\u00a0"} {
		if err := engine.ValidateQueueName(name); err != nil {
			t.Errorf("ValidateQueueName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"q\x1b[31m", "q\n", "q\t", "\x00", "q\x7f", "q\u0085", "q\u009b2J", "q#1", "", "{q}"} {
		if err := engine.ValidateQueueName(name); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("ValidateQueueName(%q) = %v, want ErrInvalid", name, err)
		}
	}
	c := redistest.Client(t)
	if err := engine.RegisterQueue(context.Background(), c, redistest.Queue(t), "q\x1b]0;x\x07", 1); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("RegisterQueue of a name with escapes: %v, want ErrInvalid", err)
	}
	// The engine itself reads and drains a queue an earlier version registered with one
	// (data-model.md, section 1).
	if _, err := engine.New(c, engine.Config{Queue: "legacy\n"}); err != nil {
		t.Errorf("engine.New of a legacy name with a control character: %v, want it accepted", err)
	}
}

// TestQueueShardsUnknownQueue: an unregistered queue is reported as ErrQueueNotFound, which also
// matches ErrNotFound, with a message about the queue (not a task).
func TestQueueShardsUnknownQueue(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	_, err := engine.QueueShards(context.Background(), c, "srq", redistest.Queue(t))
	if !errors.Is(err, engine.ErrQueueNotFound) || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("QueueShards of an unknown queue: %v", err)
	}
	if strings.Contains(err.Error(), "task") {
		t.Fatalf("message %q talks about a task", err)
	}
}

// TestRegistryRefusesInvalidShardCounts: a shard count in the registry that no client of this
// package writes (below 1, above MaxShards, not a number) is refused with ErrInvalid by
// QueueShards and RegisterQueue, and left as it is; Queues still lists every queue, the corrupt
// ones with Err set, so one bad entry does not hide the others.
func TestRegistryRefusesInvalidShardCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Client(t)
	prefix := "r" + redistest.Queue(t)
	t.Cleanup(func() {
		if err := redistest.DropKeys(context.Background(), c, prefix); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := engine.RegisterQueue(ctx, c, prefix, "good", engine.MaxShards); err != nil {
		t.Fatal(err)
	}
	bad := []string{"0", "-1", strconv.Itoa(engine.MaxShards + 1), "20000", "99999999999999999999", "x", "", " 2", "1.5"}
	key := engine.RegistryKey(prefix)
	for i, v := range bad {
		if err := c.HSet(ctx, key, fmt.Sprintf("bad%d", i), v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range bad {
		q := fmt.Sprintf("bad%d", i)
		n, err := engine.QueueShards(ctx, c, prefix, q)
		if !errors.Is(err, engine.ErrInvalid) || n != 0 || !strings.Contains(err.Error(), "invalid shard count") {
			t.Fatalf("QueueShards with %q stored = %d, %v; want ErrInvalid saying the count is invalid", v, n, err)
		}
		if err := engine.RegisterQueue(ctx, c, prefix, q, 1); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("RegisterQueue over %q stored: %v, want ErrInvalid", v, err)
		}
		if got, err := c.HGet(ctx, key, q).Result(); err != nil || got != v {
			t.Fatalf("stored %q became %q (%v)", v, got, err)
		}
	}
	qs, err := engine.Queues(ctx, c, prefix)
	if err != nil {
		t.Fatalf("Queues with corrupt entries: %v", err)
	}
	if len(qs) != len(bad)+1 {
		t.Fatalf("Queues listed %d queues, want %d: %+v", len(qs), len(bad)+1, qs)
	}
	for i, q := range qs[:len(bad)] {
		if q.Name != fmt.Sprintf("bad%d", i) || q.Shards != 0 || !errors.Is(q.Err, engine.ErrInvalid) {
			t.Fatalf("corrupt entry %d listed as %+v", i, q)
		}
	}
	if q := qs[len(bad)]; q != (engine.QueueInfo{Name: "good", Shards: engine.MaxShards}) {
		t.Fatalf("good entry listed as %+v", q)
	}
	if n, err := engine.QueueShards(ctx, c, prefix, "good"); n != engine.MaxShards || err != nil {
		t.Fatalf("QueueShards of a queue of MaxShards shards = %d, %v", n, err)
	}
}

// TestRegistryNilClient: the registry functions refuse a nil client, untyped or typed, with
// ErrInvalid, as New does, instead of panicking on first use.
func TestRegistryNilClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []redis.UniversalClient{nil, (*redis.Client)(nil), (*redis.ClusterClient)(nil), (*redis.Ring)(nil)} {
		if err := engine.RegisterQueue(ctx, c, "srq", "q", 1); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("RegisterQueue(%T): %v, want ErrInvalid", c, err)
		}
		if qs, err := engine.Queues(ctx, c, "srq"); !errors.Is(err, engine.ErrInvalid) || qs != nil {
			t.Errorf("Queues(%T) = %v, %v; want ErrInvalid", c, qs, err)
		}
		if n, err := engine.QueueShards(ctx, c, "srq", "q"); !errors.Is(err, engine.ErrInvalid) || n != 0 {
			t.Errorf("QueueShards(%T) = %d, %v; want ErrInvalid", c, n, err)
		}
	}
}
