package bench

// BenchmarkFloor measures, on the machine and Redis the targets run on, what each target's shape
// allows before srq does any work of its own: the round trips and the least data-structure work of
// the data model, sent by go-redis by pipeline or by the smallest script. srq is not involved. Run beside the targets
// (same binary, same server, same minutes), the ratio srq / floor says how much of a gap is the
// machine and how much is srq, which absolute figures on a noisy shared VM cannot.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
)

// floorKeys are the names of a floor benchmark's keys: records t:<i> and pending sets p:<part>,
// under one hash tag as srq's are.
type floorKeys struct{ base string }

func newFloorKeys(b *testing.B, c redis.UniversalClient) floorKeys {
	base := "srqfloor:{" + redistest.Queue(b) + "}:"
	b.Cleanup(func() {
		if err := redistest.DropKeys(context.Background(), c, base); err != nil {
			b.Error(err)
		}
	})
	return floorKeys{base}
}

func (k floorKeys) task(i int) string    { return k.base + "t:" + strconv.Itoa(i) }
func (k floorKeys) pending(p int) string { return k.base + "p:" + strconv.Itoa(p) }

// member is a pending-set member as srq writes one: a 20-digit sequence number and the id.
func (k floorKeys) member(i int) string { return fmt.Sprintf("%020d%d", i, i) }

// addTask queues the least a publish writes: a record of srq's five usual fields and a pending
// entry in partition i % 100.
func (k floorKeys) addTask(ctx context.Context, pipe redis.Pipeliner, i int, now string) {
	m := k.member(i)
	pipe.HSet(ctx, k.task(i), "d", payload20, "p", strconv.Itoa(i%100), "s", m[:20], "t", now, "c", now)
	pipe.ZAdd(ctx, k.pending(i%100), redis.Z{Score: float64(i), Member: m})
}

// BenchmarkFloor: the floors of the targets' shapes (see the file comment).
//   - publish-1: one EVALSHA of "return 1" per call with a publish's 15 keys and 10 arguments, one
//     connection: the most single publishes per second any script-based queue reaches here.
//   - publish-100: a record HSET and a pending ZADD per task, 100 tasks per pipeline: a batch
//     publish's writes with no duplicate check, no indexes and no script; publish-100-script the
//     same writes from a script, one call per 100 tasks, as srq sends a batch.
//   - publish-1-writes and publish-100-writes: every write srq's publish makes, on the same kinds
//     of keys, from the smallest script that makes them (floorWrites), 1 and 100 tasks a call: the
//     floor of srq's publish while it keeps those writes.
//   - consume/consumers-1 and /consumers-8: consumers taking 5 tasks at a time in two round trips,
//     as ConsumePrefetch/prefetch-5 and ConsumeParallel/consumers-8 do: one pipeline of ZREM from
//     the pending set and HGETALL of the record per task (the fetch), one of DEL per task (the ack).
//     Tasks are handed out by a counter in the process: no leases, no fencing, no order.
func BenchmarkFloor(b *testing.B) {
	b.Run("publish-1", func(b *testing.B) {
		c := redistest.Client(b)
		ctx := context.Background()
		k := newFloorKeys(b, c)
		script := redis.NewScript("return 1")
		keys := make([]string, 15)
		for i := range keys {
			keys[i] = k.base + strconv.Itoa(i)
		}
		args := []any{k.base, 0, "id", "0", "0", "0", "0", "0", "", payload20}
		if err := script.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
		cost := startCost(b, c)
		b.ResetTimer()
		for range b.N {
			if err := script.EvalSha(ctx, c, keys, args...).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		cost.report(b, c, b.N)
	})
	b.Run("publish-100", func(b *testing.B) {
		c := redistest.Client(b)
		ctx := context.Background()
		k := newFloorKeys(b, c)
		now := "1700000000000"
		cost := startCost(b, c)
		b.ResetTimer()
		for i := range b.N {
			pipe := c.Pipeline()
			for j := range 100 {
				k.addTask(ctx, pipe, 100*i+j, now)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "tasks/s")
		cost.report(b, c, 100*b.N)
	})
	b.Run("publish-100-script", func(b *testing.B) {
		c := redistest.Client(b)
		k := newFloorKeys(b, c)
		// The same writes in one script call per 100 tasks, as srq sends a batch: ARGV holds 3 per
		// task (id, partition, payload).
		script := redis.NewScript(`
local base, now = KEYS[1], ARGV[1]
for i = 2, #ARGV, 3 do
  local id, p = ARGV[i], ARGV[i + 1]
  local s = string.format('%020d', tonumber(id))
  redis.call('HSET', base .. 't:' .. id, 'd', ARGV[i + 2], 'p', p, 's', s, 't', now, 'c', now)
  redis.call('ZADD', base .. 'p:' .. p, now, s .. id)
end
return 1`)
		scriptBatches(b, c, script, k.base, func(args []any, id int) []any {
			return append(args, id, id%100, payload20)
		})
	})
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("publish-%d-writes", batch), func(b *testing.B) { floorPublishWrites(b, batch) })
	}
	b.Run("consume", func(b *testing.B) {
		for _, consumers := range []int{1, 8} {
			b.Run(fmt.Sprintf("consumers-%d", consumers), func(b *testing.B) { floorConsume(b, consumers) })
		}
	})
}

// floorWrites is the smallest script that makes the writes srq's publish makes (lua/publish.lua),
// on the same kinds of keys, with none of its logic: no priorities, controls, delays, dedup window
// or events, and every partition taken as ready already. KEYS as engine.Keys orders them (ready,
// sched, inflight, dead, stats, seq, wake, dedup, ctl, depth, heads, …); ARGV[1] the key base,
// then an id, a partition and a payload per task. Per call: the clock, the counter, whether the
// partitions are ready, two counters, the depth index, a wake-up (the heads index is not written
// for a partition that is ready already); per task: whether its record exists, the record and its
// pending entry.
var floorWrites = redis.NewScript(`
local base = ARGV[1]
local t = redis.call('TIME')
local now = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
local n = (#ARGV - 1) / 3
local s = redis.call('INCRBY', KEYS[6], n) - n
local parts, depth = {}, {}
for i = 2, #ARGV, 3 do
  local id, p = ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', base .. 't:' .. id) == 0 then
    s = s + 1
    local seq = string.format('%020d', s)
    redis.call('HSET', base .. 't:' .. id, 'd', ARGV[i + 2], 'p', p, 's', seq, 't', now, 'c', now)
    redis.call('ZADD', base .. 'q:0:' .. p, now, seq .. id)
    parts[#parts + 1] = p
    depth[#depth + 1] = '1'; depth[#depth + 1] = p
  end
end
redis.call('ZMSCORE', KEYS[1], unpack(parts))
redis.call('HINCRBY', KEYS[5], 'pending', #parts)
redis.call('HINCRBY', KEYS[5], 'published', #parts)
if #parts == 1 then
  redis.call('ZINCRBY', KEYS[10], 1, parts[1])
else
  redis.call('ZMSCORE', KEYS[10], unpack(parts))
  redis.call('ZADD', KEYS[10], unpack(depth))
end
redis.call('LPUSH', KEYS[7], '1')
if redis.call('LLEN', KEYS[7]) > 64 then redis.call('LTRIM', KEYS[7], 0, 31) end
return #parts`)

// floorPublishWrites calls floorWrites with batch tasks a call over 100 partitions, and reports
// tasks/s and the Redis cost per task.
func floorPublishWrites(b *testing.B, batch int) {
	c := redistest.Client(b)
	ctx := context.Background()
	k := newFloorKeys(b, c)
	keys := make([]string, 15)
	for i, name := range []string{"ready", "sched", "inflight", "dead", "stats", "seq", "wake", "dedup", "ctl",
		"depth", "heads", "consumers", "qpause", "ppause", "leases"} {
		keys[i] = k.base + name
	}
	if err := floorWrites.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	args := make([]any, 0, 1+3*batch)
	next := 0
	cost := startCost(b, c)
	b.ResetTimer()
	for range b.N {
		args = append(args[:0], k.base)
		for range batch {
			next++
			args = append(args, next, next%100, payload20)
		}
		if err := floorWrites.EvalSha(ctx, c, keys, args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, c, batch*b.N)
}

// floorConsume seeds b.N tasks and has consumers take them 5 at a time (see BenchmarkFloor).
func floorConsume(b *testing.B, consumers int) {
	c := redistest.Client(b)
	ctx := context.Background()
	k := newFloorKeys(b, c)
	for i := 0; i < b.N; i += 1000 {
		pipe := c.Pipeline()
		for j := i; j < min(i+1000, b.N); j++ {
			k.addTask(ctx, pipe, j, "1700000000000")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64 // the next task not handed out
	errs := make(chan error, consumers)
	var wg sync.WaitGroup
	cost := startCost(b, c)
	b.ResetTimer()
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(5)) - 5
				if from >= b.N {
					return
				}
				to := min(from+5, b.N)
				fetch := c.Pipeline()
				for i := from; i < to; i++ {
					fetch.ZRem(ctx, k.pending(i%100), k.member(i))
					fetch.HGetAll(ctx, k.task(i))
				}
				cmds, err := fetch.Exec(ctx)
				if err == nil && len(cmds[1].(*redis.MapStringStringCmd).Val()) != 5 {
					err = fmt.Errorf("task %d: record %v", from, cmds[1])
				}
				if err != nil {
					errs <- err
					return
				}
				ack := c.Pipeline()
				for i := from; i < to; i++ {
					ack.Del(ctx, k.task(i))
				}
				if _, err := ack.Exec(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, c, b.N)
}

// BenchmarkRecordLayout measures what the task record's layout costs a script, to size a packed
// record: srq's record is a hash read with an 8-field HMGET at
// fetch and written with EXISTS and HSET at publish; a packed string would be one GET and one SET
// NX. Each script call handles 5 tasks (read, as a fetch does after its ZRANGE) or 100 (write, as a
// batch publish does); compare redis-µs/task of hash and string. srq is not involved. The read
// returns a table per task, as fetch.lua once did (it now appends a task's values to one flat list); both
// layouts pay it alike.
func BenchmarkRecordLayout(b *testing.B) {
	const read = `
local out = {}
for i = 1, 5 do
  local h = redis.call('ZRANGE', KEYS[1] .. 'p:' .. ((tonumber(ARGV[1]) + i) %% 100), 0, 1, 'WITHSCORES')
  local id = string.sub(h[1], 21)
  %s
end
return out`
	const write = `
for i = 2, #ARGV do
  local k, now = KEYS[1] .. 't:' .. ARGV[i], ARGV[1]
  %s
end
return 1`
	layouts := []struct {
		name, read, write string
	}{
		{"hash",
			`local f = redis.call('HMGET', KEYS[1] .. 't:' .. id, 'a', 'm', 'c', 't', 'd', 'h', 'n', 'x')
  out[#out + 1] = {id, '1', 'p', '0', '1', f[2] or 0, f[3] or 0, f[4] or 0, f[5] or '', f[6] or '', f[7] or 0, f[8] or ''}`,
			`if redis.call('EXISTS', k) == 0 then
    redis.call('HSET', k, 'd', 'twenty bytes payload', 'p', '17', 's', '00000000000000000001', 't', now, 'c', now)
  end`},
		{"string",
			`out[#out + 1] = {id, '1', 'p', '0', redis.call('GET', KEYS[1] .. 's:' .. id)}`,
			`redis.call('SET', k, '\020twenty bytes payload\00217' .. '00000000000000000001' .. now .. now, 'NX')`},
	}
	ctx := context.Background()
	for _, l := range layouts {
		b.Run("read/"+l.name, func(b *testing.B) {
			c := redistest.Client(b)
			k := newFloorKeys(b, c)
			pipe := c.Pipeline()
			for i := range 300 {
				k.addTask(ctx, pipe, i, "1700000000000")
				pipe.Set(ctx, k.base+"s:"+strconv.Itoa(i), "\x14twenty bytes payload\x0217000000000000000000011700000000000", 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			script := redis.NewScript(fmt.Sprintf(read, l.read))
			cost := startCost(b, c)
			b.ResetTimer()
			for i := range b.N {
				if err := script.Run(ctx, c, []string{k.base}, i).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cost.report(b, c, 5*b.N)
		})
		b.Run("write/"+l.name, func(b *testing.B) {
			c := redistest.Client(b)
			k := newFloorKeys(b, c)
			script := redis.NewScript(fmt.Sprintf(write, l.write))
			scriptBatches(b, c, script, k.base, func(args []any, id int) []any { return append(args, id) })
		})
	}
}

// scriptBatches calls script b.N times with KEYS[1] = base and ARGV = a time in ms followed by
// what add appends for each of 100 task ids, and reports tasks/s and the Redis cost per task.
func scriptBatches(b *testing.B, c redis.UniversalClient, script *redis.Script, base string, add func(args []any, id int) []any) {
	ctx := context.Background()
	if err := script.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	args := make([]any, 1, 301)
	args[0] = "1700000000000"
	cost := startCost(b, c)
	b.ResetTimer()
	for i := range b.N {
		args = args[:1]
		for j := range 100 {
			args = add(args, 100*i+j)
		}
		if err := script.EvalSha(ctx, c, []string{base}, args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, c, 100*b.N)
}
