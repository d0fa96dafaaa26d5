package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

// TestDebounceBurstRunsOnce publishes 1,000 values under one debounce key over about a second,
// with a worker running all along: the key's task runs once, with the last value, no sooner than
// a window after the last publish, and no other task was added.
func TestDebounceBurstRunsOnce(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[int](t, srq.QueueConfig{})
	ctx := testCtx(t)
	const window = time.Second // longer than any stall of a loaded machine between two publishes
	type run struct {
		value int
		at    time.Time
	}
	runs := make(chan run, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		runs <- run{task.Value, time.Now()}
		return nil
	}), srq.WorkerConfig{Concurrency: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	opts := &srq.PublishOpts{Partition: "user-42", Debounce: &srq.Debounce{Key: "reindex:42", Window: window}}
	const n = 1000
	var first string
	var lastSent time.Time
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * time.Millisecond)); wait > 0 {
			time.Sleep(wait) // pace the burst over a second
		}
		lastSent = time.Now()
		res, err := q.Publish(ctx, i, opts)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 0 && (res.Replaced || res.Dropped):
			t.Fatalf("first publish: %+v, want added", res)
		case i == 0:
			first = res.ID
		case !res.Replaced || res.ID != first:
			// The window is far longer than the gaps: the task never became due in between.
			t.Fatalf("publish %d: %+v, want a replace of %s", i, res, first)
		}
	}
	select {
	case r := <-runs:
		if r.value != n-1 {
			t.Fatalf("ran with %d, want the last value %d", r.value, n-1)
		}
		if early := lastSent.Add(window).Sub(r.at); early > 0 {
			t.Fatalf("ran %v before a window after the last publish", early)
		}
	case <-ctx.Done():
		t.Fatal("the debounced task did not run")
	}
	waitFor(t, "the ack", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Acked == 1
	})
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Published != 1 || st.Replaced != n-1 || st.Pending != 0 || st.InFlight != 0 || len(runs) != 0 {
		t.Fatalf("stats %+v, %d more runs: want 1 published, %d replaced, nothing left", st, len(runs), n-1)
	}
}

// Environment of the throttle publisher processes (TestThrottleAcrossProcesses).
const (
	throttleChildEnv = "SRQ_TEST_THROTTLE_CHILD"
	throttleAddrEnv  = "SRQ_TEST_THROTTLE_ADDR"
	throttleQueueEnv = "SRQ_TEST_THROTTLE_QUEUE"
)

// throttleWindow is the window of TestThrottleAcrossProcesses, and throttleFor how long each of
// its publishers publishes.
const throttleWindow, throttleFor = 200 * time.Millisecond, 1200 * time.Millisecond

// throttlePublisher is a publisher process of TestThrottleAcrossProcesses: it publishes throttled
// values as fast as it can for throttleFor, then prints how many were added and dropped.
func throttlePublisher() {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(throttleAddrEnv)})
	defer c.Close()
	q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: os.Getenv(throttleQueueEnv)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	// The scripts are made and loaded before the clock starts, so the publishing time is spent
	// publishing. The embedded Redis runs the scripts in Go, in the test's process, beside the
	// rest of the suite: there the publishers go on longer, for enough windows to pass.
	if err := q.Engine().LoadScripts(ctx); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	publishFor := throttleFor
	if redistest.Embedded() {
		publishFor = 3 * throttleFor
	}
	added, dropped := 0, 0
	for end := time.Now().Add(publishFor); time.Now().Before(end); {
		res, err := q.Publish(ctx, os.Getenv(throttleChildEnv),
			&srq.PublishOpts{Debounce: &srq.Debounce{Key: "sync", Window: throttleWindow, Mode: srq.Throttle}})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if res.Dropped {
			dropped++
		} else {
			added++
		}
	}
	fmt.Println(added, dropped)
	os.Exit(0)
}

// TestThrottleAcrossProcesses runs 4 publisher processes that publish throttled values of one key
// as fast as they can for 1.2 s (3.6 s on the embedded Redis), with a worker of concurrency 4 running: the tasks added are at
// least a window apart on the server's clock, none is added while another has not ended (no two
// runs overlap), and every publish not added was dropped and counted.
func TestThrottleAcrossProcesses(t *testing.T) {
	if who := os.Getenv(throttleChildEnv); who != "" {
		throttlePublisher()
		return
	}
	t.Parallel()
	srv := redistest.Shared(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	ctx := testCtx(t)
	var mu sync.Mutex
	var enqueued []time.Time
	running, overlaps := 0, 0
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, task *srq.Task[string]) error {
		mu.Lock()
		running++
		if running > 1 {
			overlaps++
		}
		enqueued = append(enqueued, task.EnqueuedAt)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // some work, so that an overlap would show
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)

	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestThrottleAcrossProcesses$")
		cmd.Env = append(os.Environ(), throttleChildEnv+"="+strconv.Itoa(i), throttleAddrEnv+"="+srv.Addr,
			throttleQueueEnv+"="+q.Name())
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	added, dropped := 0, 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("publisher %d: %v: %s", i, err, outs[i])
		}
		var a, d int
		if _, err := fmt.Sscan(outs[i].String(), &a, &d); err != nil {
			t.Fatalf("publisher %d printed %q", i, outs[i])
		}
		added, dropped = added+a, dropped+d
	}
	waitFor(t, "the runs of the tasks added", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Acked == int64(added) && st.Pending == 0 && st.InFlight == 0
	})
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d publishes: %d added, %d dropped", added+dropped, added, dropped)
	if added < 2 || dropped < 10 || st.Published != int64(added) || st.Dropped != int64(dropped) || len(enqueued) != added {
		t.Fatalf("%d added, %d dropped, %d runs, stats %+v: want several of each, all counted", added, dropped, len(enqueued), st)
	}
	if overlaps > 0 {
		t.Fatalf("%d runs overlapped another: a task was added before the last ended", overlaps)
	}
	for i := 1; i < len(enqueued); i++ {
		if gap := enqueued[i].Sub(enqueued[i-1]); gap < throttleWindow {
			t.Fatalf("tasks %d and %d added %v apart, less than the window", i-1, i, gap)
		}
	}
}

// TestDebounceRefusalsOfQueue checks the options a debounced publish refuses, with ErrInvalid and
// nothing written: an id, a delay or time, a wait (PublishAndWait), an empty key, a window
// outside 1 ms to 7 days.
func TestDebounceRefusalsOfQueue(t *testing.T) {
	t.Parallel()
	q, c := newQueue[string](t, srq.QueueConfig{})
	ctx := testCtx(t)
	d := func() *srq.Debounce { return &srq.Debounce{Key: "k", Window: time.Second} }
	for _, o := range []srq.PublishOpts{
		{ID: "a", Debounce: d()},
		{Delay: time.Second, Debounce: d()},
		{At: time.Now().Add(time.Hour), Debounce: d()},
		{Wait: true, Debounce: d()},
		{Debounce: &srq.Debounce{Window: time.Second}},
		{Debounce: &srq.Debounce{Key: "k"}},
		{Debounce: &srq.Debounce{Key: "k", Window: 8 * 24 * time.Hour}},
		{Debounce: &srq.Debounce{Key: "k", Window: 1500 * time.Microsecond}},
		{Debounce: &srq.Debounce{Key: "k", Window: time.Second + time.Nanosecond}},
		{Debounce: &srq.Debounce{Key: "k", Window: time.Second, Mode: srq.Throttle + 1}},
	} {
		if _, err := q.Publish(ctx, "x", &o); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o.Debounce, err)
		}
	}
	if _, err := srq.PublishAndWait[string](ctx, q, "x", &srq.PublishOpts{Debounce: d()}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("PublishAndWait: %v, want ErrInvalid", err)
	}
	if n, err := c.Exists(ctx, q.Engine().Keys().Seq()).Result(); err != nil || n != 0 {
		t.Fatalf("refused publishes wrote: %d, %v", n, err)
	}
}

// TestDebounceShardedQueue checks that a sharded queue debounces a key published to one partition.
func TestDebounceShardedQueue(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[string](t, srq.QueueConfig{Shards: 3})
	ctx := testCtx(t)
	opts := &srq.PublishOpts{Partition: "p", Debounce: &srq.Debounce{Key: "k", Window: time.Minute}}
	a, err := q.Publish(ctx, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Publish(ctx, "b", opts)
	if err != nil || !b.Replaced || b.ID != a.ID {
		t.Fatalf("second publish: %+v, %v; want a replace of %s", b, err, a.ID)
	}
}
