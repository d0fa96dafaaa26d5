package bench

// What Redis spent, from deltas of INFO commandstats and INFO cpu (never CONFIG RESETSTAT, so a
// shared REDIS_URL server keeps its statistics). Wall-clock figures on a small shared machine swing
// with whatever else runs; the server's CPU time per task and the number of commands the scripts
// ran per task do not, so every benchmark reports them beside tasks/s.

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// redisCost is a snapshot of the server's counters.
type redisCost struct {
	scriptUsec int64               // usec of EVALSHA, EVAL and FCALL: the scripts, by the server's clock
	scripts    int64               // EVALSHA, EVAL and FCALL calls
	innerCalls int64               // every other command but INFO: what the scripts ran
	cpuUsec    int64               // CPU time of the server's main thread, user + sys
	byCmd      map[string][2]int64 // calls and usec by command name
	clientCPU  time.Duration       // CPU time of this process: the benchmark and its Redis client
	clientOK   bool                // clientCPU could be read
}

// readRedisCost reads c's INFO commandstats and INFO cpu.
func readRedisCost(tb testing.TB, c redis.UniversalClient) redisCost {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		tb.Fatalf("info: %v", err)
	}
	r := redisCost{byCmd: map[string][2]int64{}, cpuUsec: redistest.MainThreadCPU(info)}
	r.clientCPU, r.clientOK = processCPU()
	for cmd, st := range redistest.ParseCommandStats(info) {
		r.byCmd[cmd] = [2]int64{st.Calls, st.Usec}
		switch {
		case cmd == "evalsha" || cmd == "eval" || cmd == "evalsha_ro" || cmd == "eval_ro" ||
			cmd == "fcall" || cmd == "fcall_ro":
			r.scriptUsec += st.Usec
			r.scripts += st.Calls
		case cmd == "info" || strings.HasPrefix(cmd, "script") || strings.HasPrefix(cmd, "function"):
		default:
			r.innerCalls += st.Calls
		}
	}
	return r
}

// startCost collects the garbage that setting up the benchmark left (seeding, for one), so that
// the client's CPU figure does not charge its collection to the measured loop, and reads c's
// counters.
func startCost(tb testing.TB, c redis.UniversalClient) redisCost {
	tb.Helper()
	runtime.GC()
	return readRedisCost(tb, c)
}

// report adds, per task, the Redis cost since start to b's metrics: redis-µs/task (script time),
// redis-cpu-µs/task (the server's main thread), redis-calls/task (commands the scripts ran) and
// evals/task (script calls, that is round trips); and client-cpu-µs/task, the CPU time of this
// process (the benchmark's loop, srq and go-redis; on a machine whose few cores the client and
// the server share, the two CPU figures together bound the throughput).
func (start redisCost) report(b *testing.B, c redis.UniversalClient, tasks int) {
	b.Helper()
	end := readRedisCost(b, c)
	n := float64(max(tasks, 1))
	if start.clientOK && end.clientOK {
		b.ReportMetric(float64((end.clientCPU-start.clientCPU).Microseconds())/n, "client-cpu-µs/task")
	}
	b.ReportMetric(float64(end.scriptUsec-start.scriptUsec)/n, "redis-µs/task")
	b.ReportMetric(float64(end.cpuUsec-start.cpuUsec)/n, "redis-cpu-µs/task")
	b.ReportMetric(float64(end.innerCalls-start.innerCalls)/n, "redis-calls/task")
	b.ReportMetric(float64(end.scripts-start.scripts)/n, "evals/task")
	if testing.Verbose() && b.N > 1 {
		type row struct {
			name        string
			calls, usec int64
		}
		var rows []row
		for name, v := range end.byCmd {
			w := start.byCmd[name]
			if d := (row{name, v[0] - w[0], v[1] - w[1]}); d.calls > 0 && name != "info" {
				rows = append(rows, d)
			}
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].usec > rows[j].usec })
		var sb strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&sb, " %s=%.2f/%.2fµs", r.name, float64(r.calls)/n, float64(r.usec)/n)
		}
		b.Logf("per task, calls/Redis µs by command:%s", sb.String())
	}
}

// BenchmarkScripts measures each hot script alone, per task, over 100 unordered partitions:
// publish of 1 and of 100 tasks, fetch of 5 (the leases are not settled while it runs) and ack of
// 5 (of tasks fetched before the timer starts). Its Redis metrics are the per-script cost.
func BenchmarkScripts(b *testing.B) {
	ctx := context.Background()
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("publish-%d", batch), func(b *testing.B) { benchPublish(b, batch, 100) })
	}
	b.Run("fetch-5", func(b *testing.B) {
		e := newEngine(b)
		seed(b, e, 5*b.N, 100, false)
		cost := startCost(b, e.Client())
		b.ResetTimer()
		for range b.N {
			if ds, err := e.Fetch(ctx, "bench", 5, time.Hour); err != nil || len(ds) != 5 {
				b.Fatalf("fetch: %d tasks, %v", len(ds), err)
			}
		}
		b.StopTimer()
		cost.report(b, e.Client(), 5*b.N)
	})
	b.Run("ack-5", func(b *testing.B) {
		e := newEngine(b)
		seed(b, e, 5*b.N, 100, false)
		var rs []engine.Receipt
		for len(rs) < 5*b.N {
			ds, err := e.Fetch(ctx, "bench", 1000, time.Hour)
			if err != nil || len(ds) == 0 {
				b.Fatalf("fetch: %d tasks, %v", len(ds), err)
			}
			for i := range ds {
				rs = append(rs, ds[i].Receipt())
			}
		}
		cost := startCost(b, e.Client())
		b.ResetTimer()
		for i := range b.N {
			if _, err := e.Ack(ctx, rs[5*i:5*i+5]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cost.report(b, e.Client(), 5*b.N)
	})
}
