package inspect

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// commandCounter is a go-redis hook that counts the commands a client sends, those of pipelines
// one by one.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// seedOutcomes writes n kept outcomes of succeeded tasks k0…k<n-1>, as outcome.lua lays them out
// (the o: hash and the outs index), the later ones kept longer.
var seedOutcomes = redis.NewScript(`
local base, n, at = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 0, n - 1 do
  redis.call('HSET', base .. 'o:k' .. i, 's', 'ok', 'f', at, 'v', 'result')
  redis.call('ZADD', base .. 'outs', at + 3600000 + i, 'k' .. i)
end
return n
`)

// TestTaskListsCallBudget: with 1,000,000 partitions holding a pending task each (5,000 on the
// embedded Redis), a partition of 6,000 tasks at three priorities, 1,000 delayed partitions,
// 5,000 kept outcomes and 100 consumers with their records, every page of the task lists (the
// first and one halfway down, the largest page size), the workers and the overdue schedules
// sends a number of commands bounded by its page, not by the queue, and on a redis-server costs
// under 50 ms of Redis time (its SLOWLOG). It is not parallel: it seeds a Redis of its own, and
// runs beside no other test at this size.
func TestTaskListsCallBudget(t *testing.T) {
	srv := redistest.Start(t)
	n := srv.Size(t, 1_000_000, 5_000)
	if testing.Short() {
		n = 5_000
	}
	counter := &commandCounter{}
	c := srv.ClientWith(t, func(o *redis.Options) { o.ReadTimeout = time.Minute })
	c.AddHook(counter)
	b := setupOn(t, c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ctx = ctx
	e := b.shards[0]
	base := e.Keys().Base()
	now := time.Now().UnixMilli()
	const chunk = 2000
	for from := 0; from < n; from += chunk {
		if err := seedScript.Run(ctx, c, nil, base, from, min(from+chunk, n), now).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var deep, later []engine.Message
	for i := range 6000 {
		deep = append(deep, engine.Message{Partition: "deep", Priority: i % 3})
	}
	for i := range 1000 {
		later = append(later, engine.Message{Partition: partition.Key(fmt.Sprint("later", i)), Delay: time.Duration(i+1) * time.Minute})
	}
	for _, batch := range [][]engine.Message{deep[:3000], deep[3000:], later} {
		if _, err := e.Publish(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := seedOutcomes.Run(ctx, c, nil, base, 5000, now).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		consumer := fmt.Sprint("worker-", i)
		if _, err := e.Fetch(ctx, consumer, 1, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := e.PutWorker(ctx, consumer, engine.WorkerRecord{Host: "h", PID: i, Queues: []string{b.queue}, Concurrency: 10,
			Started: time.Now(), Updated: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if srv.Real() {
		for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
			if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := b.in.Stats(ctx, b.queue)
	if err != nil || st.PendingPartitions != int64(n)+1+1000-100 {
		t.Fatalf("stats: %d partitions with pending tasks, %v", st.PendingPartitions, err)
	}
	half := "1:" + strconv.Itoa(n/2) + ".0"
	deepRank, err := c.ZRank(ctx, e.Keys().Heads(), "deep").Result()
	if err != nil {
		t.Fatal(err)
	}
	const L = MaxLimit
	calls := []struct {
		name   string
		budget int64 // commands
		f      func() (int, error)
	}{
		{"pending, first page", 4*L + 20, func() (int, error) {
			pg, err := b.in.PendingTasks(ctx, b.queue, TaskQuery{Limit: L})
			return len(pg.Tasks), err
		}},
		{"pending, halfway", 4*L + 20, func() (int, error) {
			pg, err := b.in.PendingTasks(ctx, b.queue, TaskQuery{Limit: L, Cursor: half})
			return len(pg.Tasks), err
		}},
		{"pending, inside the deep partition", 4*L + 20, func() (int, error) {
			pg, err := b.in.PendingTasks(ctx, b.queue, TaskQuery{Limit: L, Cursor: "1:" + strconv.FormatInt(deepRank, 10) + ".4321"})
			return len(pg.Tasks), err
		}},
		{"delayed, first page", 4*L + 20, func() (int, error) {
			pg, err := b.in.PendingTasks(ctx, b.queue, TaskQuery{Limit: L, Delayed: true})
			return len(pg.Tasks), err
		}},
		{"completed, first page", 2*L + 10, func() (int, error) {
			pg, err := b.in.Outcomes(ctx, b.queue, "", L)
			return len(pg.Outcomes), err
		}},
		{"completed, next page", 2*L + 10, func() (int, error) {
			pg, err := b.in.Outcomes(ctx, b.queue, "", L)
			if err != nil {
				return 0, err
			}
			pg, err = b.in.Outcomes(ctx, b.queue, pg.Next, L)
			return len(pg.Outcomes), err
		}},
		{"workers", 10, func() (int, error) {
			ws, _, err := b.in.Workers(ctx, b.queue)
			return len(ws), err
		}},
		{"overdue schedules", 10, func() (int, error) { _, err := b.in.OverdueSchedules(ctx, b.queue); return 1, err }},
		{"run now", 10, func() (int, error) { _, err := b.in.RunNow(ctx, b.queue, "t"+strconv.Itoa(n/3)); return 1, err }},
	}
	for _, call := range calls {
		if srv.Real() {
			if err := c.SlowLogReset(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		before := counter.n.Load()
		got, err := call.f()
		sent := counter.n.Load() - before
		if err != nil || got == 0 {
			t.Fatalf("%s: %d rows, %v", call.name, got, err)
		}
		if call.name == "completed, next page" {
			call.budget *= 2 // two pages
		}
		msg := fmt.Sprintf("%-36s %5d rows, %5d commands", call.name, got, sent)
		if srv.Real() {
			d := slowlogTime(t, ctx, c)
			msg += fmt.Sprintf(", %8.3f ms of Redis time", float64(d.Microseconds())/1000)
			// A page's work is a few milliseconds; walking the million partitions would take
			// seconds. The bound leaves room for a loaded machine (the suite on two cores).
			if d > 250*time.Millisecond {
				t.Errorf("%s took %v of Redis time, the budget is 250ms", call.name, d)
			}
		}
		t.Log(msg)
		if sent > call.budget {
			t.Errorf("%s sent %d commands, the budget is %d", call.name, sent, call.budget)
		}
	}
}

// slowlogTime sums the Redis time of the commands in the slow log but its own.
func slowlogTime(t *testing.T, ctx context.Context, c *redis.Client) time.Duration {
	t.Helper()
	logs, err := c.SlowLogGet(ctx, 100_000).Result()
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
