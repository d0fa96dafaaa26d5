package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
