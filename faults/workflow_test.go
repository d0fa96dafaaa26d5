package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/lua"
	"github.com/srqueue/srq/partition"
	"github.com/srqueue/srq/srqtest/history"
)

// The workflow of TestWorkflowWorkersKilled. A parent, of the queue "wf", spawns on its first run
// four children to the queue "wf-items" (payload wfItem) and two to its own queue (wfJob leaves),
// waits for them, reads their results, spawns three more to "wf-items", waits again, reads all
// nine and completes with their sum as its result. A child's value is its parent's index × 100 +
// its place; an item's result is 3v+1, a leaf's 5v+2, so the sum says every result was read.
//
// A parent's id names its scenario, the points where a worker process is held and then killed:
//
//	pa-N: after it spawned, before its wait is recorded ("spawned"), on both of its waits
//	      ("respawned" the second);
//	pb-N: after the registration of its children of "wf-items" at its own queue (spawn.lua) and
//	      before their publish ("registered"), and after it read every result, before its ack
//	      ("final");
//	pc-N: while it waits: its child k0 is held as it starts ("running") until the parent is
//	      parked, then its process is killed;
//	pd-N: a child's end racing with the parent's re-delivery: held after it spawned ("spawned")
//	      until its children k0…k3, run in other processes, are held once they completed, before
//	      their ack ("done"), then killed; its re-delivery is held as it starts ("rerun"); then the
//	      test lets k0 and k2 ack, lets the parent go on and kills the processes holding k1 and k3,
//	      whose acks are lost.
//
// Each point holds once per run of the test, in whichever process gets there first (a file marks
// it), so a parent's later runs go through.
type wfJob struct {
	Leaf bool
	V    int
}

type wfItem struct{ V int }

// wfState is what a parent keeps between its runs.
type wfState struct{ Step, Sum int }

// wfChild is one child a workflow parent spawns.
type wfChild struct {
	name  string
	items bool // to "wf-items"; else a leaf of the parent's own queue
	round int  // 1: on the parent's first run; 2: after its first wait
	k     int  // the child's value is its parent's index × 100 + k
}

var wfChildren = []wfChild{
	{"k0", true, 1, 0}, {"k1", true, 1, 1}, {"k2", true, 1, 2}, {"k3", true, 1, 3},
	{"s0", false, 1, 4}, {"s1", false, 1, 5},
	{"k4", true, 2, 6}, {"k5", true, 2, 7}, {"k6", true, 2, 8},
}

func wfItemResult(v int) int { return 3*v + 1 }
func wfLeafResult(v int) int { return 5*v + 2 }

// wfResult is what child c of parent n gives.
func wfResult(n int, c wfChild) int {
	if c.items {
		return wfItemResult(100*n + c.k)
	}
	return wfLeafResult(100*n + c.k)
}

// wfExpected is the result of parent n: the sum of its children's.
func wfExpected(n int) int {
	sum := 0
	for _, c := range wfChildren {
		sum += wfResult(n, c)
	}
	return sum
}

// wfParentID matches a parent's id; its second letter is its scenario.
var wfParentID = regexp.MustCompile(`^p[abcd]-[0-9]+$`)

// wfFirstItem matches the ids of the children a pd- parent holds before their ack.
var wfFirstItem = regexp.MustCompile(`^pd-[0-9]+/k[0-3]$`)

// wfIndex is the index of parent id.
func wfIndex(id string) int {
	n, _ := strconv.Atoi(id[strings.IndexByte(id, '-')+1:])
	return n
}

// wfParentOf is the parent's id of child id.
func wfParentOf(id string) string { return id[:strings.IndexByte(id, '/')] }

// wfItemPartition is the partition of an item child: unordered.
func wfItemPartition(c wfChild) partition.Key { return partition.Key(fmt.Sprint("u", c.k%3)) }

// wfSpawn is one line of a process's spawn record: a child's spawn and whether it was reported
// as a duplicate.
type wfSpawn struct {
	ID  string `json:"id"`
	Dup bool   `json:"dup"`
}

// holder holds a worker process at the points TestWorkflowWorkersKilled kills at: the first time
// any process of the run gets to a point for an id, it prints "held <point> <id>" and waits until
// the test sends "release <point> <id>" on its stdin (or kills it), or the hold's time runs out.
type holder struct {
	dir string
	mu  sync.Mutex
	rel map[string]chan struct{}
}

// holdMax bounds a hold the test neither releases nor ends by a kill (its line was lost with a
// process the test killed for another point): the run goes on, slower.
const holdMax = 20 * time.Second

func (h *holder) release(key string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.rel[key]
	if ch == nil {
		ch = make(chan struct{})
		h.rel[key] = ch
	}
	return ch
}

// readReleases closes the release channel of each "release <point> <id>" line of r.
func (h *holder) readReleases(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if key, ok := strings.CutPrefix(sc.Text(), "release "); ok {
			ch := h.release(key)
			h.mu.Lock()
			select {
			case <-ch:
			default:
				close(ch)
			}
			h.mu.Unlock()
		}
	}
}

// mark is the file that says a process of the run was held at point for id.
func (h *holder) mark(point, id string) string {
	return filepath.Join(h.dir, "held-"+point+"-"+strings.ReplaceAll(id, "/", "_"))
}

// held says whether a process of the run was held at point for id.
func (h *holder) held(point, id string) bool {
	_, err := os.Stat(h.mark(point, id))
	return err == nil
}

// hold holds the caller at point for id, once per run (see holder). It returns ctx's cause when
// ctx ends first.
func (h *holder) hold(ctx context.Context, point, id string) error {
	f, err := os.OpenFile(h.mark(point, id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil // held once already
	}
	_ = f.Close()
	key := point + " " + id
	ch := h.release(key)
	fmt.Printf("held %s\n", key)
	t := time.NewTimer(holdMax)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		fmt.Fprintf(os.Stderr, "helper: hold %s: not released within %v\n", key, holdMax)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return nil
}

// spawnHold is a go-redis hook that holds a pb- parent's first spawn.lua call once it returned:
// its children of "wf-items" are registered with it and not yet published.
type spawnHold struct {
	h     *holder
	calls map[string]bool // spawn.lua's SHA1 and function name
}

func (s spawnHold) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s spawnHold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s spawnHold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		switch strings.ToLower(cmd.Name()) {
		case "evalsha", "fcall":
		default:
			return err
		}
		if err != nil || len(args) < 2 || !s.calls[fmt.Sprint(args[1])] {
			return err
		}
		for _, a := range args[2:] {
			if id, ok := a.(string); ok && wfParentID.MatchString(id) && id[1] == 'b' {
				if herr := s.h.hold(ctx, "registered", id); herr != nil {
					return herr
				}
			}
		}
		return nil
	}
}

// workflowMain is a helper process of mode "workflow": one worker of cfg.Queue ("wf") and its
// items queue until ctx ends, recording with rec, holding at the test's points (holder).
func workflowMain(ctx context.Context, c *redis.Client, cfg helperConfig, rec *history.Recorder) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	dir := filepath.Dir(cfg.History)
	h := &holder{dir: dir, rel: map[string]chan struct{}{}}
	go h.readReleases(os.Stdin)
	src, err := lua.Source("spawn")
	if err != nil {
		return fail(err)
	}
	c.AddHook(spawnHold{h: h, calls: map[string]bool{lua.SHA1(src): true, lua.Function(engine.LibraryName(), "spawn"): true}})
	jobs, err := srq.NewQueue[wfJob](c, srq.QueueConfig{Name: cfg.Queue})
	if err != nil {
		return fail(err)
	}
	items, err := srq.NewQueue[wfItem](c, srq.QueueConfig{Name: cfg.Queue + "-items"})
	if err != nil {
		return fail(err)
	}
	spawns, err := os.OpenFile(filepath.Join(dir, cfg.Process+".spawns"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	defer spawns.Close()
	var mu sync.Mutex
	record := func(res []srq.PublishResult) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range res {
			b, _ := json.Marshal(wfSpawn{ID: r.ID, Dup: r.Duplicate})
			_, _ = spawns.Write(append(b, '\n'))
		}
	}
	// bug reports what only a fault of srq explains: the test fails on the line.
	bug := func(id, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		fmt.Printf("bug %s: %s\n", id, msg)
		return srq.Permanent(errors.New(msg))
	}
	spawn := func(ctx context.Context, t *srq.Task[wfJob], round int) error {
		n := wfIndex(t.ID)
		var its []srq.Spawned[wfItem]
		var leaves []srq.Spawned[wfJob]
		for _, ch := range wfChildren {
			switch {
			case ch.round != round:
			case ch.items:
				its = append(its, srq.Spawned[wfItem]{Name: ch.name, Value: wfItem{V: 100*n + ch.k},
					Opts: &srq.SpawnOpts{Publish: srq.PublishOpts{Partition: string(wfItemPartition(ch))}}})
			default:
				leaves = append(leaves, srq.Spawned[wfJob]{Name: ch.name, Value: wfJob{Leaf: true, V: 100*n + ch.k}})
			}
		}
		if len(its) > 0 {
			res, err := srq.SpawnBatch(ctx, t.Delivery, items, its)
			if err != nil {
				return err
			}
			record(res)
		}
		if len(leaves) > 0 {
			res, err := srq.SpawnBatch(ctx, t.Delivery, jobs, leaves)
			if err != nil {
				return err
			}
			record(res)
		}
		return nil
	}
	// results reads the results of the children of round round and before, which must all be
	// there, and returns their sum.
	results := func(ctx context.Context, t *srq.Task[wfJob], round int) (int, error) {
		got, err := srq.ChildResults[int](ctx, t.Delivery)
		if got == nil && err != nil {
			return 0, err // Redis's or the context's
		}
		n, sum := wfIndex(t.ID), 0
		for _, ch := range wfChildren {
			if ch.round > round {
				continue // spawned by a run that was then killed: not waited for yet
			}
			v, ok := got[ch.name]
			if !ok || v != wfResult(n, ch) {
				return 0, bug(t.ID, "run %d (attempt %d) after wait %d: child %s gave %d (ok %v), want %d; errors: %v",
					round+1, t.Attempt, round, ch.name, v, ok, wfResult(n, ch), err)
			}
			sum += v
		}
		return sum, nil
	}
	var holding sync.Map // the parents held here after their spawn
	parent := srq.HandlerFunc[wfJob](func(ctx context.Context, t *srq.Task[wfJob]) error {
		if t.Value.Leaf {
			return t.SetResult(wfLeafResult(t.Value.V))
		}
		scenario := t.ID[1]
		st, _, err := srq.State[wfState](ctx, t.Delivery)
		if err != nil {
			return err
		}
		switch st.Step {
		case 0:
			if scenario == 'd' && h.held("spawned", t.ID) {
				// Delivered again after the kill at its spawn.
				if err := h.hold(ctx, "rerun", t.ID); err != nil {
					return err
				}
			}
			if scenario == 'd' && !h.held("spawned", t.ID) {
				// Its children k0…k3 run elsewhere while it is held to be killed (they snooze here).
				holding.Store(t.ID, true)
				defer holding.Delete(t.ID)
			}
			if err := spawn(ctx, t, 1); err != nil {
				return err
			}
			if scenario == 'a' || scenario == 'd' {
				if err := h.hold(ctx, "spawned", t.ID); err != nil {
					return err
				}
			}
			if err := t.SetState(wfState{Step: 1}); err != nil {
				return err
			}
			return srq.WaitChildren()
		case 1:
			sum, err := results(ctx, t, 1)
			if err != nil {
				return err
			}
			if err := spawn(ctx, t, 2); err != nil {
				return err
			}
			if scenario == 'a' {
				if err := h.hold(ctx, "respawned", t.ID); err != nil {
					return err
				}
			}
			if err := t.SetState(wfState{Step: 2, Sum: sum}); err != nil {
				return err
			}
			return srq.WaitChildren()
		case 2:
			sum, err := results(ctx, t, 2)
			if err != nil {
				return err
			}
			if sum != wfExpected(wfIndex(t.ID)) {
				return bug(t.ID, "sum %d, want %d", sum, wfExpected(wfIndex(t.ID)))
			}
			if scenario == 'b' {
				if err := h.hold(ctx, "final", t.ID); err != nil {
					return err
				}
			}
			return t.SetResult(sum)
		}
		return bug(t.ID, "state %+v", st)
	})
	item := srq.ResultHandlerFunc[wfItem, int](func(ctx context.Context, t *srq.Task[wfItem]) (int, error) {
		if strings.HasPrefix(t.ID, "pc-") && strings.HasSuffix(t.ID, "/k0") {
			if err := h.hold(ctx, "running", t.ID); err != nil {
				return 0, err
			}
		}
		if _, ok := holding.Load(wfParentOf(t.ID)); ok && wfFirstItem.MatchString(t.ID) {
			return 0, srq.Snooze(20 * time.Millisecond) // its parent is held here, to be killed
		}
		return wfItemResult(t.Value.V), nil
	})
	// done holds pd- parents' first children once they completed, before their ack.
	done := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			err := next(ctx, d)
			if err == nil && wfFirstItem.MatchString(d.ID) {
				if herr := h.hold(ctx, "done", d.ID); herr != nil {
					return herr
				}
			}
			return err
		}
	}
	w, err := srq.NewWorkerOf(srq.WorkerConfig{Concurrency: cfg.Concurrency, Lease: cfg.Lease,
		ConsumerID: cfg.Process, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		Retry:      func(int, error) time.Duration { return 10 * time.Millisecond },
		Middleware: []srq.Middleware{done, rec.Middleware(cfg.Process)}},
		srq.Serve(jobs, parent, nil), srq.Serve(items, item, nil))
	if err != nil {
		return fail(err)
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
	}
	if err := rec.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// TestWorkflowWorkersKilled runs workflow parents (see wfJob) that spawn typed children to their
// own queue and to another, wait for them, read their results, spawn more and complete, on three
// worker processes killed with SIGKILL at the points that matter (the scenarios of wfJob): after a
// spawn and before the wait is recorded, between a child's registration with its parent and its
// publish, while a parent waits, while children finish as their parent is delivered again, and
// after a parent read its results, before its ack. A new process replaces each killed one. Every
// parent must complete with the sum of its children's results; every child must run (at least
// once) and be created once: its queue's published count is the number of children, and no spawn
// of it but one was reported new; nothing of the workflows is left in Redis. The history must
// show nothing lost, unexpected, duplicated (beyond a crash's redelivery), out of order or
// overlapping. The parents run one at a time, so that a kill for one scenario cuts no other
// short: the first four published at once to one ordered partition, where each waits for the one
// before it (its waits hold the partition), the next four unordered, each published when the one
// before it completed; -short runs the first four.
func TestWorkflowWorkersKilled(t *testing.T) {
	t.Parallel()
	orderedRounds, unorderedRounds := 1, 1 // of the four scenarios each
	if testing.Short() {
		orderedRounds, unorderedRounds = 1, 0
	}
	t0 := time.Now()
	srv := realServer(t)
	ctx := testCtx(t, 4*time.Minute)
	const (
		workers = 3
		lease   = time.Second
	)
	c := client(t, srv, nil)
	jobs, err := srq.NewQueue[wfJob](c, srq.QueueConfig{Name: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	items, err := srq.NewQueue[wfItem](c, srq.QueueConfig{Name: "wf-items"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rec := history.NewRecorder("test", nil)

	type line struct {
		p    *proc
		text string
	}
	lines := make(chan line, 1024)
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) }) // after the processes' cleanups: their forwarders end
	var procs []*proc
	live := map[*proc]bool{}
	start := func() {
		name := fmt.Sprintf("w%d", len(procs)+1)
		p := startHelper(t, dir, helperConfig{Mode: "workflow", Addr: srv.Addr, Queue: jobs.Name(), Process: name,
			History: filepath.Join(dir, name+".jsonl"), Lease: lease, Concurrency: 16})
		procs = append(procs, p)
		live[p] = true
		go func() {
			for l := range p.lines {
				select {
				case lines <- line{p, l}:
				case <-quit:
					return
				}
			}
		}()
	}
	for range workers {
		start()
	}
	kills := map[string]int{}
	kill := func(p *proc, why, id string) {
		if !live[p] {
			return
		}
		p.kill()
		rec.Crash(p.name)
		delete(live, p)
		kills[why]++
		t.Logf("%v killed %s (%s %s)", time.Since(t0).Round(time.Millisecond), p.name, why, id)
		start()
	}
	release := func(p *proc, key string) {
		if live[p] {
			_, _ = fmt.Fprintf(p.in, "release %s\n", key)
		}
	}

	// The parents, scenarios a, b, c and d in turn: the first ones published at once to one
	// ordered partition, where each waits for the one before it to complete; the others
	// unordered, each published once the one before it completed. Either way one parent runs at a
	// time, so a kill at one parent's point does not cut another's short.
	var parents []string // published
	publish := func(i int, ordered bool) {
		id := fmt.Sprintf("p%c-%d", "abcd"[i%4], i)
		o := srq.PublishOpts{ID: id, Partition: "o", Ordered: ordered, KeepResult: time.Hour}
		if !ordered {
			o.Partition = "u"
		}
		if _, err := jobs.Publish(ctx, wfJob{}, &o); err != nil {
			t.Fatal(err)
		}
		parents = append(parents, id)
		rec.Published("test", id, partition.Key(key(o)))
	}
	for i := range 4 * orderedRounds {
		publish(i, true)
	}
	total := 4 * (orderedRounds + unorderedRounds)
	// completed says whether parent id completed.
	completed := func(id string) bool {
		_, err := srq.ResultOf[int](ctx, jobs, id)
		return err == nil
	}

	type held struct {
		p  *proc
		id string
	}
	var running []held              // children of pc- parents held as they start
	doneHeld := map[string][]held{} // pd- parents' children held before their ack, by parent
	rerun := map[string]bool{}      // pd- parents delivered again, held or let go
	spawnedD := map[string]held{}   // pd- parents held after their spawn, not yet killed
	spawnedAt := map[string]time.Time{}
	// race settles child h of a pd- parent delivered again: k0 and k2 ack now, as their parent
	// runs; the processes holding k1 and k3 are killed, their acks lost.
	race := func(h held) {
		if strings.HasSuffix(h.id, "/k0") || strings.HasSuffix(h.id, "/k2") {
			release(h.p, "done "+h.id)
		} else {
			kill(h.p, "child-done-as-parent-reruns", h.id)
		}
	}
	finished := func() bool {
		js, err1 := jobs.Stats(ctx)
		is, err2 := items.Stats(ctx)
		return err1 == nil && err2 == nil && js.Acked >= int64(3*len(parents)) &&
			js.Pending+js.InFlight+js.Waiting+is.Pending+is.InFlight+is.Waiting == 0
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(3 * time.Minute)
	lastCheck := time.Time{}
	for {
		select {
		case l := <-lines:
			t.Logf("%v %s: %s", time.Since(t0).Round(time.Millisecond), l.p.name, l.text)
			point, id, _ := strings.Cut(strings.TrimPrefix(l.text, "held "), " ")
			switch {
			case strings.HasPrefix(l.text, "bug "):
				t.Errorf("process %s: %s", l.p.name, l.text)
			case !strings.HasPrefix(l.text, "held "):
			case point == "running":
				running = append(running, held{l.p, id})
			case point == "done":
				h := held{l.p, id}
				if rerun[wfParentOf(id)] {
					race(h)
				} else {
					doneHeld[wfParentOf(id)] = append(doneHeld[wfParentOf(id)], h)
				}
			case point == "rerun":
				rerun[id] = true
				hs := doneHeld[id]
				delete(doneHeld, id)
				for _, h := range hs { // the acks first, then the parent goes on, then the kills
					if !strings.HasSuffix(h.id, "/k1") && !strings.HasSuffix(h.id, "/k3") {
						race(h)
					}
				}
				release(l.p, "rerun "+id)
				for _, h := range hs {
					if strings.HasSuffix(h.id, "/k1") || strings.HasSuffix(h.id, "/k3") {
						race(h)
					}
				}
			case point == "spawned" && id[1] == 'd':
				spawnedD[id] = held{l.p, id} // killed once its children are held before their ack
				spawnedAt[id] = time.Now()
			default: // spawned, registered, respawned, final
				kill(l.p, point, id)
			}
			continue
		case <-tick.C:
		}
		// A pd- parent held after its spawn: its process dies once its children k0…k3 are held
		// before their ack (those held in its process die with it, and run again as it does).
		for id, h := range spawnedD {
			if len(doneHeld[id]) == 4 || time.Since(spawnedAt[id]) > 3*time.Second {
				kill(h.p, "spawned", id)
				delete(spawnedD, id)
			}
		}
		// A pc- parent's child held as it starts: its process dies once the parent waits.
		for i := 0; i < len(running); i++ {
			h := running[i]
			ti, err := jobs.Engine().Task(ctx, wfParentOf(h.id))
			if live[h.p] && (err != nil || ti.State != "waiting") {
				continue
			}
			kill(h.p, "parent-waiting", h.id)
			running = append(running[:i], running[i+1:]...)
			i--
		}
		if time.Since(lastCheck) > 200*time.Millisecond {
			lastCheck = time.Now()
			if len(parents) < total && completed(parents[len(parents)-1]) {
				publish(len(parents), false)
			}
			if len(parents) == total && len(running) == 0 && finished() {
				break
			}
		}
		if time.Now().After(deadline) {
			js, _ := jobs.Stats(ctx)
			is, _ := items.Stats(ctx)
			t.Fatalf("the parents did not all complete: kills %v; wf %+v; wf-items %+v", kills, js, is)
		}
	}
	var stopping sync.WaitGroup
	for p := range live {
		select {
		case <-p.ready:
		default: // still starting: it has run nothing, and need not stop gracefully
			p.kill()
			rec.Crash(p.name)
			continue
		}
		stopping.Go(func() {
			if err := p.stop(30 * time.Second); err != nil {
				t.Errorf("worker %s: %v", p.name, err)
			}
		})
	}
	stopping.Wait()

	// Every parent completed with the sum of its children's results.
	for _, id := range parents {
		got, err := srq.ResultOf[int](ctx, jobs, id)
		if err != nil || got != wfExpected(wfIndex(id)) {
			t.Errorf("parent %s: result %d, %v; want %d", id, got, err, wfExpected(wfIndex(id)))
		}
	}
	// Every child was created once: its queue published it once, and of its spawns (one per run
	// of its parent that got there) one at most was reported new.
	nItems, nLeaves := 0, 0
	for _, ch := range wfChildren {
		if ch.items {
			nItems++
		} else {
			nLeaves++
		}
	}
	js, err1 := jobs.Stats(ctx)
	is, err2 := items.Stats(ctx)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if want := int64(len(parents) * (1 + nLeaves)); js.Published != want || js.Acked != want || js.Dead != 0 {
		t.Errorf("wf: published %d, acked %d, dead %d; want %d published and acked", js.Published, js.Acked, js.Dead, want)
	}
	if want := int64(len(parents) * nItems); is.Published != want || is.Acked != want || is.Dead != 0 {
		t.Errorf("wf-items: published %d, acked %d, dead %d; want %d published and acked", is.Published, is.Acked, is.Dead, want)
	}
	spawned := map[string][2]int{} // child id -> spawns reported new, duplicates
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join(dir, p.name+".spawns"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			var s wfSpawn
			if json.Unmarshal([]byte(l), &s) != nil {
				continue // empty, or torn by a kill
			}
			n := spawned[s.ID]
			if s.Dup {
				n[1]++
			} else {
				n[0]++
			}
			spawned[s.ID] = n
		}
	}
	dups := 0
	for _, id := range parents {
		for _, ch := range wfChildren {
			cid := id + "/" + ch.name
			n := spawned[cid]
			if n[0] > 1 {
				t.Errorf("child %s: %d spawns reported new", cid, n[0])
			}
			if n[0]+n[1] == 0 {
				t.Errorf("child %s: no spawn of it returned", cid)
			}
			dups += n[1]
			p := partition.Key("")
			if ch.items {
				p = wfItemPartition(ch)
			}
			rec.Published("spawn "+cid, cid, p)
		}
	}

	// Nothing of the workflows is left: no task record, children's entries, parent's ref, kept
	// signal or outbox message.
	for _, eng := range []*engine.Engine{jobs.Engine(), items.Engine()} {
		for _, what := range []string{"t:", "fk:", "fc:", "sg:", "fo"} {
			var keys []string
			iter := c.Scan(ctx, 0, redistest.GlobEscape(eng.Keys().Base()+what)+"*", 1000).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			if len(keys) > 0 {
				t.Errorf("left in Redis: %q", keys)
			}
		}
	}

	// The history: children count as published by their parents.
	events := rec.Events()
	for _, p := range procs {
		events = append(events, readHistory(t, filepath.Join(dir, p.name+".jsonl"))...)
	}
	r := check(t, events)
	if want := len(parents) * (1 + len(wfChildren)); r.Published != want || r.Completed != want {
		t.Errorf("published %d, completed %d; want %d each", r.Published, r.Completed, want)
	}
	// Every point was reached: a run that missed one tested less than it says.
	for _, why := range []string{"spawned", "registered", "respawned", "final", "parent-waiting", "child-done-as-parent-reruns"} {
		if kills[why] == 0 {
			t.Errorf("no kill at %q (kills: %v)", why, kills)
		}
	}
	t.Logf("%d processes, kills %v; %d spawns of existing children reported as duplicates (wf-items counted %d); %d tasks recovered from expired leases",
		len(procs), kills, dups, is.Duplicates, js.Recovered+is.Recovered)
}
