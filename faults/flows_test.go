package faults_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest/history"
)

// TestFlowsWorkersKilled runs 200 flows (each a root, three steps after it in parallel, and a join
// after those three) on a queue of two shards, so releases go both through the ack's own call and
// through the relay, on three worker processes killed with SIGKILL at random points and replaced.
// The history must show every step completed, no step started before each step it depends on had
// completed, ordered partitions never run twice at once, and every flow must end completed.
func TestFlowsWorkersKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 1,000-step run")
	}
	rng := newRand(t)
	srv := realServer(t)
	ctx := testCtx(t, 3*time.Minute)
	const (
		flows   = 200
		shards  = 2
		workers = 3
		kills   = 4
		lease   = 2 * time.Second
	)
	q, err := srq.NewQueue[task](client(t, srv, nil), srq.QueueConfig{Name: "flows", Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := history.NewRecorder("test", nil)
	var procs, live []*proc
	spawn := func() {
		name := fmt.Sprintf("w%d", len(procs)+1)
		p := startHelper(t, dir, helperConfig{Mode: "work", Addr: srv.Addr, Queue: q.Name(), Shards: shards,
			Process: name, History: filepath.Join(dir, name+".jsonl"), Lease: lease, Concurrency: 4,
			Work: 40 * time.Millisecond})
		procs = append(procs, p)
		live = append(live, p)
	}
	for range workers {
		spawn()
	}

	// A partition per step, drawn from 40: some ordered, spread over both shards.
	part := func() (string, bool) {
		n := rng.IntN(40)
		return fmt.Sprint("p", n), n%4 == 0
	}
	step := func(name string, n int) *srq.Step {
		p, ordered := part()
		return q.Step(name, task{N: n}, &srq.PublishOpts{Partition: p, Ordered: ordered})
	}
	ids := make([]string, flows)
	for i := range flows {
		root := step("root", i)
		mid := []*srq.Step{step("a", i).After(root), step("b", i).After(root), step("c", i).After(root)}
		join := step("join", i).After(mid...)
		f := &srq.Flow{ID: fmt.Sprint("f", i), Steps: append([]*srq.Step{root, join}, mid...)}
		if _, err := srq.PublishFlow(ctx, f); err != nil {
			t.Fatal(err)
		}
		ids[i] = f.ID
		for _, s := range f.Steps {
			var after []string
			for _, p := range s.Parents() {
				after = append(after, f.ID+"/"+p.Name())
			}
			rec.PublishedStep("producer", f.ID+"/"+s.Name(), s.Partition(), after)
		}
	}

	completed := func() int {
		n := 0
		for _, eng := range q.Shards() {
			if s, ok := stats(ctx, eng); ok {
				n += int(s.FlowsCompleted)
			}
		}
		return n
	}
	points := make([]int, kills)
	for i := range points {
		points[i] = flows/10 + rng.IntN(flows*7/10)
	}
	slices.Sort(points)
	killed := 0
	var last time.Time
	waitUntil(t, "every flow to complete with the kills done", 150*time.Second, func() bool {
		done := completed()
		// One kill at a time, apart: each one lands in the middle of running flows.
		if killed < kills && done >= points[killed] && time.Since(last) > 300*time.Millisecond {
			last = time.Now()
			i := rng.IntN(len(live))
			victim := live[i]
			live = append(live[:i], live[i+1:]...)
			victim.kill()
			rec.Crash(victim.name)
			t.Logf("killed %s with %d flows completed", victim.name, done)
			killed++
			spawn()
		}
		return killed == kills && done == flows
	})
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
	if r.Published != 5*flows || r.Completed != 5*flows {
		t.Errorf("published %d steps, completed %d; want %d each", r.Published, r.Completed, 5*flows)
	}
	for _, id := range ids {
		f, err := q.Flow(ctx, id)
		if err != nil || f.State != srq.FlowCompleted || f.Succeeded != 5 {
			t.Errorf("flow %s: %s, %d succeeded, %v", id, f.State, f.Succeeded, err)
		}
	}
}
