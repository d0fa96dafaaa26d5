package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
	"github.com/srqueue/srq/srqtest/history"
)

func TestMain(m *testing.M) {
	// A worker process started by a test is this binary with helperEnv set: it runs the helper,
	// not the tests.
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	redistest.Main(m) // it silences go-redis, which logs every failed dial while Redis is down
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// seedEnv overrides the seed of every randomised test, to replay a failure.
const seedEnv = "SRQ_FAULTS_SEED"

// newRand returns the test's random source and logs its seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", seedEnv, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, seedEnv, seed)
	return rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32|1))
}

// realServer starts a redis-server of the test's own with args, or skips the test when only the
// embedded Redis is available (redistest fails the test instead under CI).
func realServer(t *testing.T, args ...string) *redistest.Server {
	t.Helper()
	return redistest.StartReal(t, "a process to stop, pause, kill or restart", args...)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil checks cond every 10ms until it holds, failing the test after timeout. It waits on a
// condition with a deadline: what it waits for lives in Redis or another process, which cannot
// signal this one.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// stats reads the queue's stats, or the zero Stats with ok false when Redis does not answer.
func stats(ctx context.Context, eng *engine.Engine) (engine.Stats, bool) {
	s, err := eng.Stats(ctx)
	return s, err == nil
}

// drained reports whether eng's queue has nothing pending or leased.
func drained(ctx context.Context, eng *engine.Engine) bool {
	s, ok := stats(ctx, eng)
	return ok && s.Pending == 0 && s.InFlight == 0
}

// producer publishes msgs in batches, retrying a batch with the same ids until Redis acknowledges
// it (so a publish whose reply was lost is not doubled), and records each acknowledged publish.
type producer struct {
	name  string
	q     *srq.Queue[task]
	rec   *history.Recorder
	batch int
	// pace, when set, is called before each batch; it may block.
	pace func()
	// failures counts publish calls that failed and were retried.
	failures int
}

// task is the payload of every fault test.
type task struct {
	N int
}

func (p *producer) run(ctx context.Context, msgs []srq.Message[task]) error {
	for len(msgs) > 0 {
		b := msgs[:min(p.batch, len(msgs))]
		msgs = msgs[len(b):]
		if p.pace != nil {
			p.pace()
		}
		for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			res, err := p.q.PublishBatch(ctx, b)
			if err == nil {
				for i, r := range res {
					p.rec.Published(p.name, r.ID, partition.Key(key(b[i].Opts)))
				}
				break
			}
			if errors.Is(err, srq.ErrInvalid) {
				return err
			}
			p.failures++
			select {
			case <-ctx.Done():
				return fmt.Errorf("producer %s: %w (last error: %w)", p.name, ctx.Err(), err)
			case <-time.After(backoff):
			}
		}
	}
	return nil
}

// key is the partition key opts publish to.
func key(o srq.PublishOpts) string {
	if o.Ordered {
		return "!" + o.Partition
	}
	return o.Partition
}

// workload returns n messages with ids prefix-0 … prefix-(n-1), about half of them spread over
// ordered partitions and the rest over unordered ones and the base partition.
func workload(rng *rand.Rand, prefix string, n, orderedParts, unorderedParts int) []srq.Message[task] {
	msgs := make([]srq.Message[task], n)
	for i := range msgs {
		o := srq.PublishOpts{ID: fmt.Sprintf("%s-%d", prefix, i)}
		switch r := rng.IntN(2*unorderedParts + 2); {
		case r < unorderedParts+2:
			o.Partition, o.Ordered = fmt.Sprintf("o%d", rng.IntN(orderedParts)), true
		case r < 2*unorderedParts+1:
			o.Partition = fmt.Sprintf("u%d", rng.IntN(unorderedParts))
		} // else the base partition
		msgs[i] = srq.Message[task]{Value: task{N: i}, Opts: o}
	}
	return msgs
}

// work is a handler that works for a random time up to max, honouring its context: when the
// context ends first it returns the context's cause, as a well-behaved handler does.
func work(max time.Duration) srq.Handler[task] {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	return srq.HandlerFunc[task](func(ctx context.Context, _ *srq.Task[task]) error {
		mu.Lock()
		d := time.Duration(rng.Int64N(int64(max) + 1))
		mu.Unlock()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// runWorker runs w until the returned stop is called; stop cancels Run and waits for it to
// return, failing the test after timeout.
func runWorker(t *testing.T, w *srq.Worker, timeout time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(timeout):
				t.Errorf("Run did not return within %v of its context's end", timeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// client returns a client of srv with opt's timeouts, closed when the test ends.
func client(t *testing.T, srv *redistest.Server, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := srv.Options()
	if tweak != nil {
		tweak(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// check checks the history of events and fails the test on any anomaly not in allow.
func check(t *testing.T, events []history.Event, allow ...history.Kind) *history.Report {
	t.Helper()
	r := history.Check(events)
	t.Logf("history: %s", r)
	if err := r.Err(allow...); err != nil {
		t.Error(err)
	}
	return r
}
