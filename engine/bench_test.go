package engine

// Benchmarks and a cost test for the acceptance point "fetch+ack throughput with 100,000
// partitions is at least 90% of that with 10 partitions, and an empty fetch over 100,000 delayed
// partitions costs under 1 ms of Redis time".
//
// Run them with, for example:
//
//	go test ./engine -run XXX -bench 'FetchAck|EmptyFetch' -benchtime 20000x -count 3
//
// Besides ns/op they report tasks/s and what Redis spent, from deltas of INFO (never CONFIG
// RESETSTAT, so they work on any server):
//
//   - redis-µs: the scripts' time, cmdstat_evalsha (or fcall) usec (the server's clock: it also counts time
//     the server waited for a CPU on a busy machine);
//   - redis-cpu-µs: the CPU time of the server's main thread (INFO cpu), scripts plus networking;
//   - redis-calls: the commands the scripts ran (commandstats of every other command).
//
// All are server-wide: on a server other clients use (a shared REDIS_URL) their commands count
// too. A redis-server the harness starts is used by this test binary alone. Compare 10 with
// 100,000 partitions within one run, and prefer redis-cpu-µs on a noisy machine. On a machine whose
// speed drifts between the two (a shared VM), BenchmarkFetchAckInterleaved serves both queues in
// alternating blocks and reports their ratio:
//
//	go test ./engine -run XXX -bench FetchAckInterleaved -benchtime 20000x -count 5

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

const (
	benchFetchN     = 10      // tasks per fetch
	benchSeedBatch  = 1000    // messages per Publish while seeding
	benchSeedCap    = 500_000 // the most tasks one seeding round adds, to bound the server's memory
	benchBigPartCnt = 100_000
)

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	calls, usec int64
}

func (s cmdStat) sub(o cmdStat) cmdStat { return cmdStat{s.calls - o.calls, s.usec - o.usec} }
func (s cmdStat) add(o cmdStat) cmdStat { return cmdStat{s.calls + o.calls, s.usec + o.usec} }

// perCall is the mean Redis microseconds of one call.
func (s cmdStat) perCall() float64 {
	if s.calls == 0 {
		return 0
	}
	return float64(s.usec) / float64(s.calls)
}

// cmdStats is INFO commandstats by command name ("evalsha", "zadd", "config|resetstat"). Redis 7
// counts the commands a script runs under their own names as well as the script under evalsha.
// Under cpuStat it holds the CPU time of the server's main thread from INFO cpu, in usec.
type cmdStats map[string]cmdStat

// cpuStat is the cmdStats entry for the server's CPU time: unlike commandstats, which times
// commands by the clock, it does not grow while the server waits for a CPU on a busy machine.
const cpuStat = "(cpu)"

// readCmdStats reads INFO commandstats and INFO cpu.
func readCmdStats(ctx context.Context, tb testing.TB, c redis.UniversalClient) cmdStats {
	tb.Helper()
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		tb.Fatalf("info commandstats cpu: %v", err)
	}
	out := cmdStats{cpuStat: {usec: redistest.MainThreadCPU(info)}}
	for name, st := range redistest.ParseCommandStats(info) {
		out[name] = cmdStat{st.Calls, st.Usec}
	}
	return out
}

// since returns s minus an earlier snapshot.
func (s cmdStats) since(earlier cmdStats) cmdStats {
	out := cmdStats{}
	for name, st := range s {
		if d := st.sub(earlier[name]); d.calls != 0 || d.usec != 0 {
			out[name] = d
		}
	}
	return out
}

// merge adds d to s.
func (s cmdStats) merge(d cmdStats) {
	for name, st := range d {
		s[name] = s[name].add(st)
	}
}

// scripts is the Redis time and calls of the scripts, by EVALSHA or by FCALL (Config.Scripts).
func (s cmdStats) scripts() cmdStat {
	return s["evalsha"].add(s["evalsha_ro"]).add(s["fcall"]).add(s["fcall_ro"])
}

// inner counts the commands the scripts ran: every command but the scripts and the benchmark's
// own INFO.
func (s cmdStats) inner() int64 {
	var n int64
	for name, st := range s {
		if name != "evalsha" && name != "evalsha_ro" && name != "fcall" && name != "fcall_ro" && name != "info" &&
			name != cpuStat && !strings.HasPrefix(name, "script") && !strings.HasPrefix(name, "function") {
			n += st.calls
		}
	}
	return n
}

// breakdown lists the commands by calls per unit, the most first, each with its Redis
// microseconds per unit, for logs: " zrange=4.10/3.2µs …".
func (s cmdStats) breakdown(units int) string {
	type row struct {
		name string
		cmdStat
	}
	var rows []row
	for name, st := range s {
		if name != "info" && name != cpuStat {
			rows = append(rows, row{name, st})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].calls > rows[j].calls })
	u := float64(max(units, 1))
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, " %s=%.2f/%.1fµs", r.name, float64(r.calls)/u, float64(r.usec)/u)
	}
	return b.String()
}

// benchQueue is a queue with a fixed set of partitions, every one given the same number of tasks,
// that lives across the runs of one (sub-)benchmark so that the first run (b.N = 1) does not pay
// for seeding 100,000 partitions twice.
//
// It keeps no state per partition on the client, so that the Go side costs the same with 10 and
// with 100,000 partitions: fetches serve the partitions strictly round-robin, so after t tasks no
// partition has given more than ceil(t/count).
type benchQueue struct {
	ctx     context.Context
	client  *redis.Client
	eng     *Engine
	count   int  // partitions
	ordered bool // ordered partitions

	seeded int // tasks published to each partition so far
	taken  int // tasks fetched so far
}

// newBenchQueue makes a queue of count partitions on the shared Redis; ordered partitions when
// ordered. It skips tb on the embedded Redis: its Lua and its statistics say nothing about Redis.
// The queue's keys are deleted by close.
func newBenchQueue(tb testing.TB, name string, cfg Config, count int, ordered bool) *benchQueue {
	tb.Helper()
	srv := redistest.Shared(tb)
	srv.NeedReal(tb, "its Lua and its statistics are Redis's")
	// Seeding sends 1,000 tasks a call; on a busy machine that can outlast go-redis's 3s default.
	opt := srv.Options()
	opt.ReadTimeout, opt.WriteTimeout = 30*time.Second, 30*time.Second
	client := redis.NewClient(opt)
	cfg.Queue = name
	eng, err := New(client, cfg)
	if err != nil {
		_ = client.Close()
		tb.Fatal(err)
	}
	q := &benchQueue{ctx: context.Background(), client: client, eng: eng, count: count, ordered: ordered}
	if err := eng.LoadScripts(q.ctx); err != nil {
		q.close(tb)
		tb.Fatal(err)
	}
	return q
}

// part returns the key of partition i.
func (q *benchQueue) part(i int) partition.Key {
	name := fmt.Sprintf("p%06d", i)
	if q.ordered {
		return partition.Ordered(name)
	}
	return partition.Key(name)
}

// seed publishes perPart more tasks to every partition, delayed by delay, in batches.
func (q *benchQueue) seed(tb testing.TB, perPart int, delay time.Duration) {
	tb.Helper()
	batch := make([]Message, 0, benchSeedBatch)
	payload := []byte("0123456789abcdef")
	flush := func() {
		if len(batch) == 0 {
			return
		}
		res, err := q.eng.Publish(q.ctx, batch)
		if err != nil {
			tb.Fatalf("seed: %v", err)
		}
		for _, r := range res {
			if r.Duplicate {
				tb.Fatalf("seed: %s reported duplicate", r.ID)
			}
		}
		batch = batch[:0]
	}
	for range perPart {
		for i := range q.count {
			batch = append(batch, Message{Partition: q.part(i), Delay: delay, Payload: payload})
			if len(batch) == benchSeedBatch {
				flush()
			}
		}
	}
	flush()
	q.seeded += perPart
}

// minLeft is the fewest tasks any partition still holds.
func (q *benchQueue) minLeft() int { return q.seeded - (q.taken+q.count-1)/q.count }

// topUp seeds every partition until each holds at least want ready tasks.
func (q *benchQueue) topUp(tb testing.TB, want int) {
	tb.Helper()
	if left := q.minLeft(); left < want {
		q.seed(tb, want-left, 0)
	}
}

// fetchAck leases up to benchFetchN tasks, acks them, and returns how many there were.
func (q *benchQueue) fetchAck(tb testing.TB) int {
	ds, err := q.eng.Fetch(q.ctx, "bench", benchFetchN, time.Minute)
	if err != nil {
		tb.Fatalf("fetch: %v", err)
	}
	if len(ds) == 0 {
		return 0
	}
	q.taken += len(ds)
	rs := make([]Receipt, len(ds))
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	errs, err := q.eng.Ack(q.ctx, rs)
	if err != nil {
		tb.Fatalf("ack: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			tb.Fatalf("ack %s: %v", rs[i].ID, e)
		}
	}
	return len(ds)
}

// close deletes the queue's keys: the ones it can name, then whatever a SCAN of the queue's own
// key base still finds (task records), and closes the client.
func (q *benchQueue) close(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer q.client.Close()
	k := q.eng.Keys()
	names := k.fixedKeys()
	unlink := func() {
		if len(names) > 0 {
			if err := q.client.Unlink(ctx, names...).Err(); err != nil {
				tb.Errorf("cleanup: unlink: %v", err)
			}
			names = names[:0]
		}
	}
	for i := range q.count {
		p := q.part(i)
		names = append(names, k.Pending(p, 0), k.Levels(p), k.Meta(p), k.Held(p))
		if len(names) >= 1000 {
			unlink()
		}
	}
	unlink()
	iter := q.client.Scan(ctx, 0, redistest.GlobEscape(k.Base())+"*", 1000).Iterator()
	for iter.Next(ctx) {
		names = append(names, iter.Val())
		if len(names) >= 1000 {
			unlink()
		}
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("cleanup: scan: %v", err)
	}
	unlink()
}

// BenchmarkFetchAck measures fetch (10 tasks) + ack of the batch over a queue whose every
// partition stays ready throughout: the ready index holds all partitions, 10 or 100,000. One op is
// one fetch and one ack. With at least 10 ready partitions a fetch of 10 serves 10 of them one task
// each, round-robin, ordered or not (fetch.lua lengthens ordered runs only when nothing else is
// ready), so every fetch moves 10 partitions through the ready index.
func BenchmarkFetchAck(b *testing.B) {
	for _, mode := range []struct {
		name    string
		ordered bool
	}{{"unordered", false}, {"ordered", true}} {
		b.Run(mode.name, func(b *testing.B) {
			for _, count := range []int{10, benchBigPartCnt} {
				var q *benchQueue
				b.Run(fmt.Sprintf("partitions-%d", count), func(b *testing.B) {
					if q == nil {
						q = newBenchQueue(b, redistest.Queue(b), Config{}, count, mode.ordered)
					}
					benchFetchAck(b, q)
				})
				if q != nil {
					q.close(b)
				}
			}
		})
	}
}

func benchFetchAck(b *testing.B, q *benchQueue) {
	s := &fetchAckSide{q: q}
	runBlocks(b, s)
	b.ReportMetric(s.rate(), "tasks/s")
	b.ReportMetric(float64(s.redis.scripts().usec)/float64(s.tasks), "redis-µs/task")
	b.ReportMetric(s.cpuPerTask(), "redis-cpu-µs/task")
	b.ReportMetric(float64(s.redis.inner())/float64(s.tasks), "redis-calls/task")
	if testing.Verbose() && b.N > 1 {
		b.Logf("commands per task:%s", s.redis.breakdown(s.tasks))
	}
}

// BenchmarkEmptyFetchDelayed measures a fetch that finds nothing while 100,000 partitions each
// hold one task delayed by an hour.
func BenchmarkEmptyFetchDelayed(b *testing.B) {
	for _, count := range []int{benchBigPartCnt} {
		var q *benchQueue
		b.Run(fmt.Sprintf("partitions-%d", count), func(b *testing.B) {
			if q == nil {
				q = newBenchQueue(b, redistest.Queue(b), Config{}, count, false)
				q.seed(b, 1, time.Hour)
			}
			b.ResetTimer()
			start := readCmdStats(q.ctx, b, q.client)
			for range b.N {
				if got := q.fetchAck(b); got != 0 {
					b.Fatalf("fetch leased %d tasks, want none", got)
				}
			}
			b.StopTimer()
			d := readCmdStats(q.ctx, b, q.client).since(start)
			b.ReportMetric(d.scripts().perCall(), "redis-µs/op")
			b.ReportMetric(float64(d[cpuStat].usec)/float64(b.N), "redis-cpu-µs/op")
			b.ReportMetric(float64(d.inner())/float64(max(d.scripts().calls, 1)), "redis-calls/op")
		})
		if q != nil {
			q.close(b)
		}
	}
}

// TestFetchCostIndependentOfPartitions checks, in Redis time (INFO commandstats: time the server
// spent running the script, not a wall-clock timing of the client), that a fetch does not scan
// the delayed partitions: an empty fetch over 100,000 delayed partitions costs under 1 ms. It also
// logs the cost of a fetch of 10 ready tasks beside 10 and 100,000 delayed partitions.
//
// It does not run in parallel, so no other test of this package adds to the server's counters.
func TestFetchCostIndependentOfPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 partitions")
	}
	redistest.SharedReal(t, "Redis time comes from INFO commandstats")
	const (
		emptyFetches = 500
		readyParts   = 10
		readyEach    = 50
		readyFetches = 40 // 400 of the 500 ready tasks, so every fetch finds 10 ready partitions
	)
	type cost struct{ empty, ready float64 }
	costs := map[int]cost{}
	for _, count := range []int{10, benchBigPartCnt} {
		q := newBenchQueue(t, redistest.Queue(t)+"-"+strconv.Itoa(count), Config{}, count, false)
		func() {
			defer q.close(t)
			q.seed(t, 1, time.Hour)

			start := readCmdStats(q.ctx, t, q.client)
			for range emptyFetches {
				if got := q.fetchAck(t); got != 0 {
					t.Fatalf("%d delayed partitions: fetch leased %d tasks, want none", count, got)
				}
			}
			empty := readCmdStats(q.ctx, t, q.client).since(start).scripts()

			// A few ready partitions beside the delayed ones; fetches only (no acks) are measured.
			var msgs []Message
			for i := range readyParts {
				for range readyEach {
					msgs = append(msgs, Message{Partition: partition.Key(fmt.Sprintf("ready%d", i)), Payload: []byte("x")})
				}
			}
			if _, err := q.eng.Publish(q.ctx, msgs); err != nil {
				t.Fatal(err)
			}
			var leased []Receipt
			start = readCmdStats(q.ctx, t, q.client)
			for range readyFetches {
				ds, err := q.eng.Fetch(q.ctx, "cost", benchFetchN, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != benchFetchN {
					t.Fatalf("%d delayed partitions: fetched %d tasks, want %d", count, len(ds), benchFetchN)
				}
				for _, d := range ds {
					leased = append(leased, d.Receipt())
				}
			}
			readyStats := readCmdStats(q.ctx, t, q.client).since(start)
			ready := readyStats.scripts()
			if _, err := q.eng.Ack(q.ctx, leased); err != nil {
				t.Fatal(err)
			}
			costs[count] = cost{empty.perCall(), ready.perCall()}
			t.Logf("%6d delayed partitions: empty fetch %.1f redis-µs (%d calls), fetch of %d ready tasks %.1f redis-µs (%d calls, %.1f commands a task:%s)",
				count, empty.perCall(), empty.calls, benchFetchN, ready.perCall(), ready.calls,
				float64(readyStats.inner())/float64(readyFetches*benchFetchN), readyStats.breakdown(readyFetches*benchFetchN))
		}()
	}
	if c := costs[benchBigPartCnt].empty; c >= 1000 {
		t.Errorf("an empty fetch over %d delayed partitions costs %.1f µs of Redis time, want under 1000", benchBigPartCnt, c)
	}
}

// BenchmarkFetchAckInterleaved measures what BenchmarkFetchAck does, 10 against 100,000
// partitions, with both queues on one server and served in alternating blocks of fetchAckBlock
// fetches each. On a machine whose speed drifts (a shared VM: runs of the same benchmark a minute
// apart differ by up to 40%), both sides see the same machine, so their ratio, reported as
// ratio (tasks/s with 100,000 partitions ÷ tasks/s with 10) and cpu-ratio (Redis CPU per task
// with 10 ÷ with 100,000), holds still where the figures of separate runs do not. One op is a
// fetch of 10 tasks and its ack on each queue.
func BenchmarkFetchAckInterleaved(b *testing.B) {
	for _, mode := range []struct {
		name    string
		ordered bool
	}{{"unordered", false}, {"ordered", true}} {
		var small, big *benchQueue
		b.Run(mode.name, func(b *testing.B) {
			if small == nil {
				small = newBenchQueue(b, redistest.Queue(b)+"-10", Config{}, 10, mode.ordered)
				big = newBenchQueue(b, redistest.Queue(b)+"-big", Config{}, benchBigPartCnt, mode.ordered)
			}
			sides := []*fetchAckSide{{q: small}, {q: big}}
			runBlocks(b, sides...)
			for _, s := range sides {
				if testing.Verbose() && b.N > 1 {
					b.Logf("%d partitions: commands per task:%s", s.q.count, s.redis.breakdown(s.tasks))
				}
			}
			b.ReportMetric(sides[0].rate(), "tasks/s-10")
			b.ReportMetric(sides[1].rate(), "tasks/s-100k")
			b.ReportMetric(sides[0].cpuPerTask(), "redis-cpu-µs/task-10")
			b.ReportMetric(sides[1].cpuPerTask(), "redis-cpu-µs/task-100k")
			b.ReportMetric(sides[1].rate()/sides[0].rate(), "ratio")
			b.ReportMetric(sides[0].cpuPerTask()/sides[1].cpuPerTask(), "cpu-ratio")
		})
		for _, q := range []*benchQueue{small, big} {
			if q != nil {
				q.close(b)
			}
		}
	}
}

// fetchAckBlock is the number of fetches BenchmarkFetchAckInterleaved runs on one queue before it
// turns to the other: 2,500 tasks, some 150 ms here. BenchmarkFetchAck runs in blocks of it too,
// reading the server's counters around each and topping the queue up between them.
const fetchAckBlock = 250

// runBlocks runs b.N fetches and acks on each side, the sides taking turns in blocks of
// fetchAckBlock fetches, and checks that every partition stayed ready throughout.
func runBlocks(b *testing.B, sides ...*fetchAckSide) {
	b.Helper()
	for _, s := range sides {
		s.prepare(b, b.N)
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += fetchAckBlock {
		for _, s := range sides {
			s.run(b, min(fetchAckBlock, b.N-done))
		}
	}
	b.StopTimer()
	for _, s := range sides {
		s.verify(b)
	}
}

// fetchAckSide is a queue of BenchmarkFetchAck or BenchmarkFetchAckInterleaved and what was
// measured on it.
type fetchAckSide struct {
	q       *benchQueue
	round   int           // tasks per partition a top-up brings each partition to
	elapsed time.Duration // wall time of the fetches and acks
	redis   cmdStats      // what Redis spent during them
	tasks   int
}

// fetchAckMargin is the fewest tasks every partition keeps, so that a fetch serving 10 partitions once
// each leaves all of them ready.
const fetchAckMargin = 2

// prepare seeds the queue for ops fetches as benchFetchAck does: the same number of tasks on
// each side, whatever its number of partitions.
func (s *fetchAckSide) prepare(b *testing.B, ops int) {
	b.Helper()
	parts := s.q.count
	total := benchFetchN*ops + fetchAckMargin*benchBigPartCnt
	need := (total + parts - 1) / parts
	perBlock := (benchFetchN*fetchAckBlock + parts - 1) / parts
	s.round = min(need, max(benchSeedCap/parts, fetchAckMargin+perBlock+1))
	s.q.topUp(b, s.round)
}

// run runs n fetches and acks, topping the queue up first (untimed) when a partition could run
// short during them.
func (s *fetchAckSide) run(b *testing.B, n int) {
	b.Helper()
	q := s.q
	if q.minLeft()-(benchFetchN*n+q.count-1)/q.count < fetchAckMargin {
		b.StopTimer()
		q.topUp(b, s.round)
		b.StartTimer()
	}
	before := readCmdStats(q.ctx, b, q.client)
	start := time.Now()
	for range n {
		if got := q.fetchAck(b); got != benchFetchN {
			b.Fatalf("%d partitions: fetch leased %d tasks, want %d", q.count, got, benchFetchN)
		}
	}
	s.elapsed += time.Since(start)
	if s.redis == nil {
		s.redis = cmdStats{}
	}
	s.redis.merge(readCmdStats(q.ctx, b, q.client).since(before))
	s.tasks += benchFetchN * n
}

// verify checks that every partition stayed ready throughout, as the figures assume.
func (s *fetchAckSide) verify(b *testing.B) {
	b.Helper()
	q := s.q
	if n, err := q.client.ZCard(q.ctx, q.eng.Keys().Ready()).Result(); err != nil || n != int64(q.count) {
		b.Fatalf("ready holds %d partitions (%v), want all %d", n, err, q.count)
	}
}

func (s *fetchAckSide) cpuPerTask() float64 {
	return float64(s.redis[cpuStat].usec) / float64(max(s.tasks, 1))
}

// rate is the side's tasks per second of the wall time its fetches and acks took.
func (s *fetchAckSide) rate() float64 { return float64(s.tasks) / s.elapsed.Seconds() }
