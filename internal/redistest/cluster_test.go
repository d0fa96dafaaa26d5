package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// TestClusterKeySlot checks KeySlot against the values Redis documents and against CLUSTER KEYSLOT.
func TestClusterKeySlot(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]int{"123456789": 0x31C3 % ClusterSlots, "foo": 12182, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	c := SharedCluster(t)
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 200 {
		key := "srq:{q" + strconv.Itoa(i) + "}:ready"
		got, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != KeySlot(key) {
			t.Fatalf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, KeySlot(key), got)
		}
	}
}

// TestClusterShared checks the shared cluster's shape: 3 masters owning every slot, one in-sync
// replica each, and a client that writes to the master MasterOfKey names.
func TestClusterShared(t *testing.T) {
	t.Parallel()
	c := SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("masters %v, want 3", masters)
	}
	covered := 0
	for i := range masters {
		if n := len(c.Replicas(i)); n != 1 {
			t.Errorf("master %s has %d replicas, want 1", masters[i], n)
		}
		for _, r := range c.Slots(i) {
			covered += r[1] - r[0] + 1
		}
	}
	if covered != ClusterSlots {
		t.Errorf("masters own %d slots, want %d", covered, ClusterSlots)
	}
	cl := c.Client(t)
	seen := map[int]bool{}
	for i := 0; len(seen) < 3; i++ {
		key := fmt.Sprintf("%s:{%d}", Queue(t), i)
		idx := c.MasterOfKey(key)
		if seen[idx] {
			continue
		}
		seen[idx] = true
		if err := cl.Set(ctx, key, "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		n, err := c.Admin(masters[idx]).Exists(ctx, key).Result()
		if err != nil || n != 1 {
			t.Fatalf("key %s not on master %d (%s): %d, %v", key, idx, masters[idx], n, err)
		}
	}
}

// TestClusterFailover fails a master over to its replica on a cluster of its own, checks the roles
// swapped and a client writes to the new master without error, and reads command stats.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := StartCluster(t)
	t.Logf("cluster up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client(t)
	key := keyInSlot(c.Slots(1)[0][0])
	if err := cl.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	oldMaster, oldReplica := c.Masters()[1], c.Replicas(1)[0]

	start = time.Now()
	if err := c.Failover(ctx, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	if got := c.Masters()[1]; got != oldReplica {
		t.Fatalf("master 1 is %s after failover, want %s", got, oldReplica)
	}
	if got := c.Replicas(1); !slices.Equal(got, []string{oldMaster}) {
		t.Fatalf("replicas of master 1 are %v after failover, want [%s]", got, oldMaster)
	}
	if v, err := cl.Get(ctx, key).Result(); err != nil || v != "before" {
		t.Fatalf("get after failover: %q, %v", v, err)
	}
	if err := c.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Fatalf("set after failover: %v", err)
	}
	if v, err := c.Admin(oldReplica).Get(ctx, key).Result(); err != nil || v != "after" {
		t.Fatalf("new master holds %q, %v", v, err)
	}

	stats, err := c.CommandStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[1].Addr != oldReplica {
		t.Fatalf("command stats of %d masters, master 1 %s", len(stats), stats[1].Addr)
	}
	if s := stats[1].Commands["set"]; s.Calls != 1 {
		t.Errorf("new master counts %+v SET calls, want 1 (the one since the reset)", s)
	}

	// And back, so a second failover of the same slots works too.
	if err := c.Failover(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := c.Masters()[1]; got != oldMaster {
		t.Fatalf("master 1 is %s after failing back, want %s", got, oldMaster)
	}
}

func TestParseCommandStats(t *testing.T) {
	t.Parallel()
	got := ParseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=10,usec=250,usec_per_call=25.00,rejected_calls=0,failed_calls=2\r\n" +
		"cmdstat_client|setname:calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n")
	if got["evalsha"] != (CommandStat{Calls: 10, Usec: 250, FailedCalls: 2}) || got["client|setname"].Calls != 1 || len(got) != 2 {
		t.Fatalf("ParseCommandStats: %+v", got)
	}
	n := NodeCommandStats{Commands: got}
	if tot := n.Total("evalsha", "evalsha_ro"); tot.Calls != 10 {
		t.Fatalf("Total: %+v", tot)
	}
}
