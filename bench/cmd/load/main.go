// Command load runs producers and a worker pool against a Redis for a while and reports
// throughput, end-to-end latency, idle pickup latency, Redis CPU per task and Redis memory per
// pending task. It starts its own redis-server unless -redis-url (or REDIS_URL) names one; it uses
// queues of its own and deletes their keys at the end.
//
//	go run ./bench/cmd/load -duration 10s -partitions 1000 -ordered 0.5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

type config struct {
	url        string
	producers  int
	workers    int
	partitions int
	ordered    float64
	payload    int
	batch      int
	duration   time.Duration
	rate       int
}

// job is the load's payload: when it was published, and a body of the requested size.
type job struct {
	Sent int64
	Body []byte
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "redis-url", os.Getenv("REDIS_URL"), "Redis to use (default: start a redis-server)")
	flag.IntVar(&cfg.producers, "producers", 2, "publishing goroutines")
	flag.IntVar(&cfg.workers, "workers", 8, "worker concurrency (handlers)")
	flag.IntVar(&cfg.partitions, "partitions", 1000, "partitions the tasks spread over")
	flag.Float64Var(&cfg.ordered, "ordered", 0.5, "share of partitions that are ordered, 0 to 1")
	flag.IntVar(&cfg.payload, "payload", 20, "payload body bytes")
	flag.IntVar(&cfg.batch, "batch", 100, "tasks per publish call")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long producers publish")
	flag.IntVar(&cfg.rate, "rate", 0, "tasks per second all producers publish together (0: as fast as they can)")
	flag.Parse()
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

func run(cfg config) error {
	if cfg.producers < 1 || cfg.workers < 1 || cfg.partitions < 1 || cfg.batch < 1 || cfg.ordered < 0 || cfg.ordered > 1 {
		return fmt.Errorf("bad flags: producers, workers, partitions and batch must be ≥ 1, ordered within [0, 1]")
	}
	ctx := context.Background()
	client, stop, err := connect(cfg.url)
	if err != nil {
		return err
	}
	defer stop()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)

	q, err := srq.NewQueue[job](client, srq.QueueConfig{Name: "load-" + suffix})
	if err != nil {
		return err
	}
	defer drop(ctx, client, q.Engine())

	var published, processed atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration
	h := srq.HandlerFunc[job](func(ctx context.Context, t *srq.Task[job]) error {
		d := time.Since(time.Unix(0, t.Value.Sent))
		mu.Lock()
		latencies = append(latencies, d)
		mu.Unlock()
		processed.Add(1)
		return nil
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: cfg.workers, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	before, err := redisStats(ctx, client)
	if err != nil {
		return err
	}
	start := time.Now()
	pubCtx, stopPub := context.WithTimeout(ctx, cfg.duration)
	defer stopPub()
	var pwg sync.WaitGroup
	pubErr := make(chan error, cfg.producers)
	for p := 0; p < cfg.producers; p++ {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), uint64(start.UnixNano())))
			body := make([]byte, cfg.payload)
			var every time.Duration // between this producer's batches, for -rate
			if cfg.rate > 0 {
				every = time.Duration(float64(time.Second) * float64(cfg.batch*cfg.producers) / float64(cfg.rate))
			}
			next := time.Now()
			for pubCtx.Err() == nil {
				if every > 0 {
					if wait := time.Until(next); wait > 0 {
						time.Sleep(wait)
					}
					next = next.Add(every)
				}
				msgs := make([]srq.Message[job], cfg.batch)
				for i := range msgs {
					part := rng.IntN(cfg.partitions)
					msgs[i] = srq.Message[job]{Value: job{Sent: time.Now().UnixNano(), Body: body},
						Opts: srq.PublishOpts{Partition: strconv.Itoa(part), Ordered: float64(part) < cfg.ordered*float64(cfg.partitions)}}
				}
				if _, err := q.PublishBatch(ctx, msgs); err != nil {
					pubErr <- err
					return
				}
				published.Add(int64(len(msgs)))
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	go func() {
		for range tick.C {
			el := time.Since(start).Seconds()
			fmt.Printf("%5.1fs  published %9d (%7.0f/s)  processed %9d (%7.0f/s)\n",
				el, published.Load(), float64(published.Load())/el, processed.Load(), float64(processed.Load())/el)
		}
	}()
	pwg.Wait()
	close(pubErr)
	for err := range pubErr {
		tick.Stop()
		return err
	}
	pubTime := time.Since(start)
	for processed.Load() < published.Load() {
		if time.Since(start) > cfg.duration+2*time.Minute {
			tick.Stop()
			return fmt.Errorf("only %d of %d tasks processed", processed.Load(), published.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	total := time.Since(start)
	tick.Stop()
	after, err := redisStats(ctx, client)
	if err != nil {
		return err
	}

	// Idle pickup: with the worker idle (blocked in Redis), publish one task at a time.
	pickup := make([]time.Duration, 0, 50)
	for i := 0; i < 50; i++ {
		n := processed.Load()
		if _, err := q.Publish(ctx, job{Sent: time.Now().UnixNano()}, nil); err != nil {
			return err
		}
		for processed.Load() == n {
			time.Sleep(100 * time.Microsecond)
		}
		mu.Lock()
		pickup = append(pickup, latencies[len(latencies)-1])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	stopWorker()
	if err := <-ran; err != nil {
		return err
	}

	n := published.Load()
	fmt.Printf("\npublished %d tasks in %v: %.0f tasks/s\n", n, pubTime.Round(time.Millisecond), float64(n)/pubTime.Seconds())
	fmt.Printf("processed %d tasks in %v: %.0f tasks/s\n", n, total.Round(time.Millisecond), float64(n)/total.Seconds())
	mu.Lock()
	main := latencies[:len(latencies)-50]
	mu.Unlock()
	fmt.Printf("end-to-end latency: p50 %v  p90 %v  p99 %v\n", pct(main, 50), pct(main, 90), pct(main, 99))
	fmt.Printf("idle pickup latency: p50 %v  p99 %v\n", pct(pickup, 50), pct(pickup, 99))
	fmt.Printf("redis: %.1f µs of script time and %.1f µs of CPU per task\n",
		float64(after.scriptUsec-before.scriptUsec)/float64(n), float64(after.cpuUsec-before.cpuUsec)/float64(n))

	for _, perPart := range []int{100, 1} {
		bytes, err := memoryPerTask(ctx, client, suffix, 100_000, perPart, cfg.payload)
		if err != nil {
			return err
		}
		fmt.Printf("redis memory per pending task (%d-byte payload, %d per partition): %.0f bytes\n", cfg.payload, perPart, bytes)
	}
	return nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}

// memoryPerTask publishes n raw tasks (payload bytes each, perPart per partition) to a queue of
// its own and returns Redis's used_memory growth per task.
func memoryPerTask(ctx context.Context, c redis.UniversalClient, suffix string, n, perPart, payload int) (float64, error) {
	e, err := engine.New(c, engine.Config{Queue: fmt.Sprintf("load-mem-%d-%s", perPart, suffix)})
	if err != nil {
		return 0, err
	}
	defer drop(ctx, c, e)
	before, err := usedMemory(ctx, c)
	if err != nil {
		return 0, err
	}
	body := make([]byte, payload)
	for i := 0; i < n; i += 1000 {
		msgs := make([]engine.Message, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			msgs = append(msgs, engine.Message{Partition: partition.Key(strconv.Itoa(j / perPart)), Payload: body})
		}
		if _, err := e.Publish(ctx, msgs); err != nil {
			return 0, err
		}
	}
	after, err := usedMemory(ctx, c)
	return float64(after-before) / float64(n), err
}

func usedMemory(ctx context.Context, c redis.UniversalClient) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	return infoField(info, "used_memory:")
}

type stats struct{ scriptUsec, cpuUsec int64 }

// redisStats reads the scripts' time (INFO commandstats: evalsha, eval, fcall and fcall_ro, as
// the engine runs its scripts as a library or by their hashes) and the server's CPU time.
func redisStats(ctx context.Context, c redis.UniversalClient) (stats, error) {
	info, err := c.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return stats{}, err
	}
	cs := redistest.ParseCommandStats(info)
	var script int64
	for _, name := range []string{"evalsha", "eval", "fcall", "fcall_ro"} {
		script += cs[name].Usec
	}
	// The server's main thread, as the benchmarks count it: the I/O threads, if any, are not
	// Redis work per task.
	return stats{script, redistest.MainThreadCPU(info)}, nil
}

func infoField(info, key string) (int64, error) {
	f, err := infoFloat(info, key)
	return int64(f), err
}

func infoFloat(info, key string) (float64, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", key)
}

// connect returns a client of url, or of a redis-server started here.
func connect(url string) (redis.UniversalClient, func(), error) {
	if url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, err
		}
		c := redis.NewClient(opt)
		return c, func() { _ = c.Close() }, nil
	}
	srv, err := redistest.StartProcess()
	if err != nil {
		return nil, nil, fmt.Errorf("start redis-server (or pass -redis-url): %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	fmt.Println("redis-server started at", srv.Addr)
	return c, func() { _ = c.Close(); srv.Stop() }, nil
}

// drop deletes the keys of e's queue.
func drop(ctx context.Context, c redis.UniversalClient, e *engine.Engine) {
	if err := redistest.DropKeys(ctx, c, e.Keys().Base()); err != nil {
		fmt.Fprintln(os.Stderr, "cleanup:", err)
	}
}
