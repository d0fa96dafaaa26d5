package faults_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/srqtest/history"
)

// TestWorkersKilled runs 20,000 tasks over ordered and unordered partitions on three worker
// processes while two producers publish, and kills a random worker process with SIGKILL at random
// points of the run (after a random number of acks), starting a new one each time. Every
// acknowledged publish must complete, nothing unpublished may run, ordered partitions must run in
// publish order and never two at once, and a task may complete twice only when the process of its
// first completion was killed before its ack (history.Check's redelivery).
func TestWorkersKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 20,000-task run")
	}
	rng := newRand(t)
	srv := realServer(t)
	ctx := testCtx(t, 3*time.Minute)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "killed"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	const (
		total   = 20_000
		workers = 3
		kills   = 6
		lease   = 2 * time.Second
	)
	dir := t.TempDir()
	rec := history.NewRecorder("test", nil)
	var (
		procs []*proc // every process started, killed or not
		live  []*proc
	)
	spawn := func() {
		name := fmt.Sprintf("w%d", len(procs)+1)
		p := startHelper(t, dir, helperConfig{Mode: "work", Addr: srv.Addr, Queue: q.Name(), Process: name,
			History: filepath.Join(dir, name+".jsonl"), Lease: lease, Concurrency: 8, Work: 2 * time.Millisecond})
		procs = append(procs, p)
		live = append(live, p)
	}
	for i := 0; i < workers; i++ {
		spawn()
	}

	msgs := workload(rng, "k", total, 200, 20)
	var wg sync.WaitGroup
	produced := make(chan error, 2)
	for i := 0; i < 2; i++ {
		p := &producer{name: fmt.Sprint("p", i), q: q, rec: rec, batch: 50}
		part := msgs[i*total/2 : (i+1)*total/2]
		wg.Go(func() { produced <- p.run(ctx, part) })
	}
	go func() { wg.Wait(); close(produced) }()

	// Kill points: after a random number of acks each.
	points := make([]int64, kills)
	for i := range points {
		points[i] = int64(total/20 + rng.IntN(total*17/20))
	}
	slices.Sort(points)
	producing := true
	killed := 0
	waitUntil(t, "every task to run with the kills done", 150*time.Second, func() bool {
		for producing {
			select {
			case err, ok := <-produced:
				if !ok {
					producing = false
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				continue
			default:
			}
			break
		}
		s, ok := stats(ctx, eng)
		if !ok {
			return false
		}
		t.Logf("DEBUG %s acked %d pending %d inflight %d", time.Now().Format("05.000"), s.Acked, s.Pending, s.InFlight)
		for killed < kills && s.Acked >= points[killed] {
			i := rng.IntN(len(live))
			victim := live[i]
			live = append(live[:i], live[i+1:]...)
			victim.kill()
			rec.Crash(victim.name)
			t.Logf("killed %s after %d acks", victim.name, s.Acked)
			killed++
			spawn()
		}
		return !producing && killed == kills && s.Pending == 0 && s.InFlight == 0
	})
	checkKilledRun(t, ctx, eng, rec, dir, procs, live, total, killed)
}

// TestBatchWorkersKilled runs 1,000 tasks over ordered and unordered partitions on four batch
// worker processes (batches of up to 50) while a producer publishes, and kills three of them with
// SIGKILL at random points, mid-batch or while a batch gathers; the last one finishes the work. As for TestWorkersKilled: nothing is lost, ordered partitions run in publish order and
// never two at once, and only tasks of a killed process's batch complete twice.
func TestBatchWorkersKilled(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	srv := realServer(t)
	ctx := testCtx(t, 2*time.Minute)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "batch-killed"})
	if err != nil {
		t.Fatal(err)
	}
	eng := q.Engine()
	const (
		total   = 1_000
		workers = 4 // all started at once: a process takes seconds to start on a busy machine
		kills   = 3
		lease   = time.Second
	)
	dir := t.TempDir()
	rec := history.NewRecorder("test", nil)
	var procs, live []*proc
	spawn := func() {
		name := fmt.Sprintf("b%d", len(procs)+1)
		p := startHelper(t, dir, helperConfig{Mode: "batch", Batch: 50, Addr: srv.Addr, Queue: q.Name(), Process: name,
			History: filepath.Join(dir, name+".jsonl"), Lease: lease, Concurrency: 4, Work: 5 * time.Millisecond})
		procs = append(procs, p)
		live = append(live, p)
	}
	for range workers {
		spawn()
	}
	for _, p := range live {
		select { // a worker process takes seconds to start: the kills hit running batches
		case <-p.ready:
		case <-ctx.Done():
			t.Fatal("the worker processes did not start")
		}
	}
	msgs := workload(rng, "b", total, 30, 10)
	produced := make(chan error, 1)
	go func() {
		p := &producer{name: "p", q: q, rec: rec, batch: 50}
		produced <- p.run(ctx, msgs)
	}()
	points := make([]int64, kills)
	for i := range points {
		points[i] = int64(total/10 + rng.IntN(total*8/10))
	}
	slices.Sort(points)
	producing, killed := true, 0
	waitUntil(t, "every task to run with the kills done", 90*time.Second, func() bool {
		if producing {
			select {
			case err := <-produced:
				if err != nil {
					t.Fatal(err)
				}
				producing = false
			default:
			}
		}
		s, ok := stats(ctx, eng)
		if !ok {
			return false
		}
		for killed < kills && s.Acked >= points[killed] {
			i := rng.IntN(len(live))
			victim := live[i]
			live = append(live[:i], live[i+1:]...)
			victim.kill()
			rec.Crash(victim.name)
			t.Logf("killed %s after %d acks", victim.name, s.Acked)
			killed++
		}
		return !producing && killed == kills && s.Pending == 0 && s.InFlight == 0
	})
	checkKilledRun(t, ctx, eng, rec, dir, procs, live, total, killed)
}

// checkKilledRun stops the worker processes still live, then checks the run's history (the test's
// recorder rec and each process's file in dir) and the queue's counters: every one of total tasks
// published and completed once, in order where ordered, and acked, nothing dead, pending or in
// flight.
func checkKilledRun(t *testing.T, ctx context.Context, eng *engine.Engine, rec *history.Recorder, dir string,
	procs, live []*proc, total, killed int) {
	t.Helper()
	for _, p := range live {
		if err := p.stop(30 * time.Second); err != nil {
			t.Errorf("worker %s: %v", p.name, err)
		}
	}
	events := rec.Events()
	for _, p := range procs {
		events = append(events, readHistory(t, filepath.Join(dir, p.name+".jsonl"))...)
	}
	r := check(t, events)
	if r.Published != total || r.Completed != total {
		t.Errorf("published %d, completed %d; want %d each", r.Published, r.Completed, total)
	}
	s, _ := stats(ctx, eng)
	if s.Acked != int64(total) || s.Dead != 0 || s.Pending != 0 || s.InFlight != 0 {
		t.Errorf("stats %+v: want %d acked, nothing else", s, total)
	}
	t.Logf("%d kills; %d tasks recovered from expired leases", killed, s.Recovered)
}
