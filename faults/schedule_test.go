package faults_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
)

// scheduleMain is a helper process of mode "schedule": a Scheduler of cfg.Queue until ctx ends.
func scheduleMain(ctx context.Context, c *redis.Client, cfg helperConfig) int {
	s, err := srq.NewScheduler(c, srq.SchedulerConfig{Queues: []string{cfg.Queue},
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
	}
	return 0
}

// TestSchedulersKilled: five scheduler processes (and the worker) fire a 1-second schedule for
// 30 seconds while one of them at a time is killed with SIGKILL at random moments and a new one
// started; the worker acks the ticks as they come, so an acked tick's id is gone from Redis. Every tick from the first
// to the last is published once: none missing, no publish of an id twice (not even one refused
// as a duplicate), each run once.
func TestSchedulersKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 30-second run")
	}
	rng := newRand(t)
	srv := realServer(t)
	// A bound, not a wait: the run takes about a minute alone, and twice that beside the rest of
	// the suite under -race on two cores, where each scheduler process takes seconds to start.
	ctx := testCtx(t, 4*time.Minute)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[task](func(_ context.Context, tk *srq.Task[task]) error {
		mu.Lock()
		runs[tk.ID]++
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stopWorker := runWorker(t, w, 30*time.Second)

	dir := t.TempDir()
	var live, all []*proc
	spawn := func() {
		name := fmt.Sprintf("s%d", len(all)+1)
		p := startHelper(t, dir, helperConfig{Mode: "schedule", Addr: srv.Addr, Queue: q.Name(),
			Process: name, History: dir + "/" + name + ".jsonl"})
		live, all = append(live, p), append(all, p)
		// A process on a loaded machine may take seconds to start: the run kills one scheduler
		// only while the others are up.
		select {
		case <-p.ready:
		case <-p.exited:
			t.Fatalf("scheduler %s exited at start: %v", p.name, p.err)
		case <-ctx.Done():
			t.Fatalf("scheduler %s did not start: %v", p.name, ctx.Err())
		}
	}
	for range 5 {
		spawn()
	}
	if _, err := q.Schedule(ctx, "pulse", task{N: 1}, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	kills := 0
	end := time.Now().Add(30 * time.Second)
	for time.Now().Before(end) {
		// A random moment, not aligned with the ticks.
		select {
		case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		i := rng.IntN(len(live))
		live[i].kill()
		live = slices.Delete(live, i, i+1)
		kills++
		spawn()
	}
	for _, p := range live {
		if err := p.stop(10 * time.Second); err != nil {
			t.Errorf("scheduler %s: %v", p.name, err)
		}
	}
	// The worker fires schedules too (a sixth scheduler, never killed): stop it before the count,
	// then run what it and the others fired and no handler ran yet.
	stopWorker()
	in, err := q.GetSchedule(ctx, "pulse")
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := w.RunOnce(ctx)
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if n == 0 {
			break
		}
	}

	var ticks []int64
	for id, n := range runs {
		if n != 1 {
			t.Errorf("tick %s ran %d times", id, n)
		}
		ms, err := strconv.ParseInt(id[strings.LastIndexByte(id, '/')+1:], 10, 64)
		if err != nil || !strings.HasPrefix(id, "sched/pulse/") {
			t.Fatalf("task %q is no tick of pulse", id)
		}
		ticks = append(ticks, ms)
	}
	slices.Sort(ticks)
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i] - ticks[i-1]; d != 1000 {
			t.Errorf("ticks %d and %d are %d ms apart: a tick missing", ticks[i-1], ticks[i], d)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scheduler processes killed; %d ticks published, %d run, schedule says fired %d missed %d",
		kills, st.Published, len(ticks), in.Fired, in.Missed)
	if len(ticks) < 29 || st.Published != int64(len(ticks)) || st.Duplicates != 0 || in.Fired != int64(len(ticks)) ||
		in.Missed != 0 {
		t.Errorf("published %d (duplicates %d), ran %d distinct ticks, fired %d, missed %d: want 29 or more, all equal, none duplicate or missed",
			st.Published, st.Duplicates, len(ticks), in.Fired, in.Missed)
	}
	if t.Failed() {
		for _, p := range all {
			for _, l := range p.logs("srq: ") {
				t.Logf("%s: %s", p.name, l)
			}
		}
	}
}
