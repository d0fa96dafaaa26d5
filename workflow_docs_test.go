package srq_test

// The behaviour docs/workflows.md promises that workflow_test.go does not already show.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// A parent whose first attempt fails after it spawned runs again and spawns the same names, with
// other values: each is a duplicate, no child runs twice, and the results are those of the first
// spawns; spawning a name again after the child ended is a duplicate too.
func TestWorkflowRetrySpawnsNothingTwice(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[lineItem](t, srq.QueueConfig{})
	items, err := srq.NewQueue[lineItem](c, srq.QueueConfig{Name: q.Name() + "-items"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	childRuns := map[string]int{}
	iw, err := srq.NewWorker(items, srq.ResultHandlerFunc[lineItem, priced](func(ctx context.Context, t *srq.Task[lineItem]) (priced, error) {
		mu.Lock()
		childRuns[t.ID]++
		mu.Unlock()
		return priced{Cents: 100 * t.Value.Qty}, nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	type spawnRun struct {
		attempt int
		dup     []bool
	}
	spawns := make(chan spawnRun, 8)
	done := make(chan map[string]priced, 1)
	pw, err := srq.NewWorker(q, srq.HandlerFunc[lineItem](func(ctx context.Context, t *srq.Task[lineItem]) error {
		_, waited, err := srq.State[bool](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if waited {
			// After the wait: spawning a name again is a duplicate; the results are read.
			res, err := srq.Spawn(ctx, t.Delivery, items, "a", lineItem{Qty: 9}, nil)
			if err != nil {
				return err
			}
			spawns <- spawnRun{attempt: -1, dup: []bool{res.Duplicate}}
			got, err := srq.ChildResults[priced](ctx, t.Delivery)
			if err != nil {
				return err
			}
			done <- got
			return nil
		}
		// The second attempt decides otherwise: 10 and 20.
		scale := 1
		if t.Attempt > 1 {
			scale = 10
		}
		res, err := srq.SpawnBatch(ctx, t.Delivery, items, []srq.Spawned[lineItem]{
			{Name: "a", Value: lineItem{Qty: 1 * scale}},
			{Name: "b", Value: lineItem{Qty: 2 * scale}},
		})
		if err != nil {
			return err
		}
		spawns <- spawnRun{attempt: t.Attempt, dup: []bool{res[0].Duplicate, res[1].Duplicate}}
		if t.Attempt == 1 {
			return errors.New("the first attempt fails after spawning")
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet, Retry: srq.ExponentialBackoff(10*time.Millisecond, 10*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, iw)
	runWorker(t, pw)
	if _, err := q.Publish(ctx, lineItem{SKU: "parent"}, &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	var got map[string]priced
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("the parent never completed")
	}
	want := []spawnRun{{1, []bool{false, false}}, {2, []bool{true, true}}, {-1, []bool{true}}}
	for i, w := range want {
		s := <-spawns
		if s.attempt != w.attempt || !slices.Equal(s.dup, w.dup) {
			t.Errorf("spawn %d: attempt %d duplicates %v, want attempt %d duplicates %v", i, s.attempt, s.dup, w.attempt, w.dup)
		}
	}
	if got["a"].Cents != 100 || got["b"].Cents != 200 || len(got) != 2 {
		t.Errorf("results %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if childRuns["p/a"] != 1 || childRuns["p/b"] != 1 || len(childRuns) != 2 {
		t.Errorf("child runs %v, want each once", childRuns)
	}
}

// With IgnoreFailure, a child that dies does not end its parent's wait: the parent runs once every
// child ended, and ChildResults gives the results of those that succeeded and the failure of the
// other.
func TestWorkflowIgnoreFailure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[lineItem](t, srq.QueueConfig{Events: 100})
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before the worker stops, should the test fail first
	type seen struct {
		results  map[string]priced
		err      error
		children []srq.Child
	}
	ran := make(chan seen, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[lineItem](func(ctx context.Context, t *srq.Task[lineItem]) error {
		switch t.Value.SKU {
		case "bad":
			return srq.Permanent(errors.New("out of stock"))
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return t.SetResult(priced{Cents: 7})
		}
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			var s seen
			s.results, s.err = srq.ChildResults[priced](ctx, t.Delivery)
			cs, err := t.Children(ctx)
			if err != nil {
				return err
			}
			s.children = cs
			ran <- s
			return nil
		}
		opts := &srq.SpawnOpts{Policy: srq.IgnoreFailure}
		for _, name := range []string{"bad", "slow"} {
			if _, err := srq.Spawn(ctx, t.Delivery, q, name, lineItem{SKU: name}, opts); err != nil {
				return err
			}
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Concurrency: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, lineItem{SKU: "parent"}, &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	// bad dies, and the parent still waits for slow: it is parked, not pending.
	waitFor(t, "bad to die and the parent to wait", func() bool {
		st, err := q.Stats(ctx)
		ti, err2 := q.Engine().Task(ctx, "p")
		return err == nil && st.Dead == 1 && err2 == nil && ti.State == "waiting"
	})
	select {
	case s := <-ran:
		t.Fatalf("the parent ran again before slow ended: %+v", s)
	default:
	}
	free()
	var s seen
	select {
	case s = <-ran:
	case <-ctx.Done():
		t.Fatal("the parent did not run again")
	}
	if len(s.results) != 1 || s.results["slow"].Cents != 7 {
		t.Errorf("results %v, want slow's only", s.results)
	}
	var failed *srq.TaskFailedError
	if !errors.As(s.err, &failed) || failed.ID != "p/bad" || failed.State != "dead" || !strings.Contains(failed.Reason, "out of stock") {
		t.Errorf("ChildResults' error %v, want bad's failure", s.err)
	}
	for _, c := range s.children {
		if c.Policy != srq.IgnoreFailure || c.Queue != q.Name() || c.ID != "p/"+c.Name {
			t.Errorf("child %+v", c)
		}
	}
	if len(s.children) != 2 || s.children[0].State != "dead" || s.children[1].State != "succeeded" {
		t.Errorf("children %+v, want bad dead and slow succeeded", s.children)
	}
	evs, err := q.Engine().Events(ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	parked := 0
	for _, ev := range evs {
		if ev.Kind == engine.EventWaiting && ev.ID == "p" && ev.Detail == "c" {
			parked++
		}
	}
	if parked != 1 {
		t.Errorf("%d waiting events for the parent with Detail c, want 1", parked)
	}
}

// A task that waits for its children when it spawned none, or when every child has ended already
// and its parent has heard of it (Children), runs again at once: it is never parked.
func TestWorkflowWaitChildrenWithNoneRunning(t *testing.T) {
	t.Parallel()
	for _, spawn := range []bool{false, true} {
		t.Run(fmt.Sprintf("spawned=%v", spawn), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, c := newQueue[string](t, srq.QueueConfig{Events: 100})
			kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
			if err != nil {
				t.Fatal(err)
			}
			kw, err := srq.NewWorker(kids, srq.ResultHandlerFunc[string, string](func(_ context.Context, t *srq.Task[string]) (string, error) {
				return "done " + t.Value, nil
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, kw)
			again := make(chan []srq.Child, 1)
			w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
				if _, ok, _ := srq.State[bool](ctx, t.Delivery); ok {
					cs, err := t.Children(ctx)
					if err != nil {
						return err
					}
					again <- cs
					return nil
				}
				if spawn {
					if _, err := srq.Spawn(ctx, t.Delivery, kids, "k", "k", nil); err != nil {
						return err
					}
					for {
						// The child ends, and its end reaches the parent (Children shows it:
						// through the outbox of the child's queue), before the parent waits.
						cs, err := t.Children(ctx)
						if err != nil {
							return err
						}
						if len(cs) == 1 && cs[0].State == "succeeded" {
							break
						}
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(5 * time.Millisecond):
						}
					}
				}
				if err := t.SetState(true); err != nil {
					return err
				}
				return srq.WaitChildren()
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
				t.Fatal(err)
			}
			var cs []srq.Child
			select {
			case cs = <-again:
			case <-ctx.Done():
				t.Fatal("the parent did not run again")
			}
			if spawn != (len(cs) == 1) {
				t.Errorf("children %+v", cs)
			}
			evs, err := q.Engine().Events(ctx, "0", 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Kind == engine.EventWaiting {
					t.Errorf("the parent was parked: %+v", ev)
				}
			}
		})
	}
}

// An unordered task that sleeps holds no slot: a worker of Concurrency 1 runs another task
// meanwhile; the sleeper runs again after its sleep, its attempt unused.
func TestWorkflowSleepUnordered(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	const nap = 2 * time.Second // ample for the other task to run first, on a loaded machine too
	type run struct {
		value   string
		attempt int
		at      time.Time
	}
	runs := make(chan run, 4)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		runs <- run{t.Value, t.Attempt, time.Now()}
		if t.Value != "sleeper" {
			return nil
		}
		if _, woke, _ := srq.State[bool](ctx, t.Delivery); woke {
			return nil
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.Sleep(nap)
	}), srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "sleeper", &srq.PublishOpts{Partition: "p"}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	next := func() run {
		t.Helper()
		select {
		case r := <-runs:
			return r
		case <-ctx.Done():
			t.Fatal("no run")
		}
		return run{}
	}
	first := next()
	waitFor(t, "the sleeper to leave its lease", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 0 && st.Pending == 1
	})
	if _, err := q.Publish(ctx, "other", &srq.PublishOpts{Partition: "p"}); err != nil {
		t.Fatal(err)
	}
	other, second := next(), next()
	if first.value != "sleeper" || other.value != "other" || second.value != "sleeper" {
		t.Fatalf("runs %v, %v, %v: want the other task to run while the sleeper sleeps", first, other, second)
	}
	if d := second.at.Sub(first.at); d < nap {
		t.Errorf("the sleeper ran again after %v, want at least %v", d, nap)
	}
	if second.attempt != 1 {
		t.Errorf("the sleeper's second run is attempt %d, want 1: a sleep uses no attempt", second.attempt)
	}
}

// ChildResult reads one child by name: its result, its failure, ErrNotEnded while it runs,
// ErrNotFound for a name never spawned; ChildResults joins the errors of the others.
func TestWorkflowChildResultPerName(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[lineItem](t, srq.QueueConfig{})
	release := make(chan struct{})
	defer close(release)
	type seen struct {
		ok                    priced
		okErr, badErr, slowEr error
		noneErr, allErr       error
		all                   map[string]priced
	}
	ran := make(chan seen, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[lineItem](func(ctx context.Context, t *srq.Task[lineItem]) error {
		switch t.Value.SKU {
		case "ok":
			return t.SetResult(priced{Cents: 5})
		case "bad":
			return srq.Permanent(errors.New("out of stock"))
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		step, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		switch step {
		case 0: // ok first, so that it has ended when bad fails
			if _, err := srq.Spawn(ctx, t.Delivery, q, "ok", lineItem{SKU: "ok"}, nil); err != nil {
				return err
			}
		case 1: // bad fails while slow runs: the wait ends at once (FailDependents)
			for _, name := range []string{"bad", "slow"} {
				if _, err := srq.Spawn(ctx, t.Delivery, q, name, lineItem{SKU: name}, nil); err != nil {
					return err
				}
			}
		default:
			var s seen
			s.ok, s.okErr = srq.ChildResult[priced](ctx, t.Delivery, "ok")
			_, s.badErr = srq.ChildResult[priced](ctx, t.Delivery, "bad")
			_, s.slowEr = srq.ChildResult[priced](ctx, t.Delivery, "slow")
			_, s.noneErr = srq.ChildResult[priced](ctx, t.Delivery, "none")
			s.all, s.allErr = srq.ChildResults[priced](ctx, t.Delivery)
			ran <- s
			return nil
		}
		if err := t.SetState(step + 1); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Concurrency: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, lineItem{SKU: "parent"}, &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	var s seen
	select {
	case s = <-ran:
	case <-ctx.Done():
		t.Fatal("the parent did not run a third time")
	}
	if s.okErr != nil || s.ok.Cents != 5 {
		t.Errorf("ChildResult(ok): %v, %v", s.ok, s.okErr)
	}
	var failed *srq.TaskFailedError
	if !errors.As(s.badErr, &failed) || failed.ID != "p/bad" || failed.State != "dead" || !strings.Contains(failed.Reason, "out of stock") {
		t.Errorf("ChildResult(bad): %v, want its failure", s.badErr)
	}
	if !errors.Is(s.slowEr, srq.ErrNotEnded) {
		t.Errorf("ChildResult(slow): %v, want ErrNotEnded", s.slowEr)
	}
	if !errors.Is(s.noneErr, srq.ErrNotFound) {
		t.Errorf("ChildResult(none): %v, want ErrNotFound", s.noneErr)
	}
	if len(s.all) != 1 || s.all["ok"].Cents != 5 || !errors.Is(s.allErr, srq.ErrNotEnded) || !errors.As(s.allErr, &failed) {
		t.Errorf("ChildResults: %v, %v; want ok's result, bad's failure and slow not ended", s.all, s.allErr)
	}
}

// A child cancelled while its parent waits is a failed child: with FailDependents the parent runs
// again and sees it cancelled.
func TestWorkflowCancelledChildIsAFailure(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		err      error
		children []srq.Child
	}
	ran := make(chan seen, 1)
	dup := make(chan bool, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			var s seen
			_, s.err = srq.ChildResult[string](ctx, t.Delivery, "x")
			cs, err := t.Children(ctx)
			if err != nil {
				return err
			}
			s.children = cs
			ran <- s
			return nil
		}
		// Due in an hour: it is pending when the test cancels it.
		opts := &srq.SpawnOpts{Publish: srq.PublishOpts{Delay: time.Hour}}
		if _, err := srq.Spawn(ctx, t.Delivery, kids, "x", "x", opts); err != nil {
			return err
		}
		// Spawned again while it is pending: a duplicate.
		res, err := srq.Spawn(ctx, t.Delivery, kids, "x", "x", opts)
		if err != nil {
			return err
		}
		dup <- res.Duplicate
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	// The kids queue's worker relays what the cancel tells the parent, in another queue.
	kw, err := srq.NewWorker(kids, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parent to wait", func() bool {
		ti, err := q.Engine().Task(ctx, "p")
		return err == nil && ti.State == "waiting"
	})
	if err := kids.Cancel(ctx, "p/x"); err != nil {
		t.Fatal(err)
	}
	if !<-dup {
		t.Error("a second spawn of a pending child is not a duplicate")
	}
	select {
	case s := <-ran:
		var failed *srq.TaskFailedError
		if !errors.As(s.err, &failed) || failed.State != "cancelled" {
			t.Errorf("ChildResult(x): %v, want it cancelled", s.err)
		}
		if len(s.children) != 1 || s.children[0].State != "cancelled" {
			t.Errorf("children %+v, want x cancelled", s.children)
		}
	case <-ctx.Done():
		t.Fatal("the parent did not run again")
	}
}

// On its first run a task has no state and no signal, no children and no results; a state over
// MaxResultBytes is refused.
func TestWorkflowFirstRunAndStateLimit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{MaxResultBytes: 100})
	type seen struct {
		st                      stage
		ok                      bool
		stErr, sigErr, kidsErr  error
		resErr, bigErr, fitsErr error
		kids                    []srq.Child
		res                     map[string]string
	}
	ran := make(chan seen, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		var s seen
		s.st, s.ok, s.stErr = srq.State[stage](ctx, t.Delivery)
		_, s.sigErr = srq.SignalValue[string](ctx, t.Delivery, "go")
		s.kids, s.kidsErr = t.Children(ctx)
		s.res, s.resErr = srq.ChildResults[string](ctx, t.Delivery)
		s.bigErr = t.SetState(strings.Repeat("x", 200))
		s.fitsErr = t.SetState(stage{Step: 1})
		ran <- s
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "first", nil); err != nil {
		t.Fatal(err)
	}
	var s seen
	select {
	case s = <-ran:
	case <-ctx.Done():
		t.Fatal("no run")
	}
	if s.ok || s.stErr != nil || s.st != (stage{}) {
		t.Errorf("State on the first run: %+v, %v, %v; want the zero value, false, nil", s.st, s.ok, s.stErr)
	}
	if !errors.Is(s.sigErr, srq.ErrNotFound) {
		t.Errorf("SignalValue on the first run: %v, want ErrNotFound", s.sigErr)
	}
	if len(s.kids) != 0 || s.kidsErr != nil || len(s.res) != 0 || s.resErr != nil {
		t.Errorf("children on the first run: %v, %v; results %v, %v", s.kids, s.kidsErr, s.res, s.resErr)
	}
	if !errors.Is(s.bigErr, srq.ErrResultTooLarge) {
		t.Errorf("SetState of 200 bytes with MaxResultBytes 100: %v, want ErrResultTooLarge", s.bigErr)
	}
	if s.fitsErr != nil {
		t.Errorf("SetState of a small state: %v", s.fitsErr)
	}
}

// Spawn refuses a child name over 64 bytes, empty or holding '/', two children of one name, and
// options with an ID or Wait; a name of 64 bytes is fine. Outside a worker there is no parent.
func TestSpawnRefusesInvalidChildren(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	if _, err := srq.Spawn(ctx, &srq.Delivery{}, q, "a", "a", nil); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("Spawn from a Delivery no worker made: %v, want ErrInvalid", err)
	}
	if err := (&srq.Delivery{}).SetState(1); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("SetState on a Delivery no worker made: %v, want ErrInvalid", err)
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan []result, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Value != "parent" {
			return nil
		}
		var out []result
		for _, name := range []string{strings.Repeat("n", 65), "", "a/b", strings.Repeat("n", 64)} {
			_, err := srq.Spawn(ctx, t.Delivery, q, name, "child", nil)
			out = append(out, result{name: name, err: err})
		}
		for _, opts := range []*srq.SpawnOpts{{Publish: srq.PublishOpts{ID: "mine"}}, {Publish: srq.PublishOpts{Wait: true}}} {
			_, err := srq.Spawn(ctx, t.Delivery, q, "opts", "child", opts)
			out = append(out, result{name: fmt.Sprintf("%+v", opts.Publish), err: err})
		}
		_, err := srq.SpawnBatch(ctx, t.Delivery, q, []srq.Spawned[string]{{Name: "twin"}, {Name: "twin"}})
		out = append(out, result{name: "twin twice", err: err})
		cs, err := t.Children(ctx)
		if err != nil {
			return err
		}
		for _, c := range cs {
			out = append(out, result{name: "child " + c.Name})
		}
		results <- out
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "parent", nil); err != nil {
		t.Fatal(err)
	}
	var out []result
	select {
	case out = <-results:
	case <-ctx.Done():
		t.Fatal("no run")
	}
	if len(out) != 8 || out[7].name != "child "+strings.Repeat("n", 64) {
		t.Fatalf("results %v: want 7 spawns and one child, of 64 bytes", out)
	}
	for i, r := range out[:7] {
		ok := i == 3 // the name of 64 bytes
		if ok && r.err != nil || !ok && !errors.Is(r.err, srq.ErrInvalid) {
			t.Errorf("Spawn %q: %v", r.name, r.err)
		}
	}
}

// Queue.Signal fails with ErrNotFound for a task that does not exist and with ErrInvalid for a
// name over 128 bytes, empty or holding NUL; a task that reported no progress has none.
func TestSignalAndProgressOfUnknownTasks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	if _, err := q.Signal(ctx, "never-published", "go", "v"); !errors.Is(err, srq.ErrNotFound) {
		t.Errorf("Signal to an unknown task: %v, want ErrNotFound", err)
	}
	if _, _, err := srq.ProgressOf[int](ctx, q, "never-published"); !errors.Is(err, srq.ErrNotFound) {
		t.Errorf("ProgressOf an unknown task: %v, want ErrNotFound", err)
	}
	if _, err := q.Publish(ctx, "t", &srq.PublishOpts{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := srq.ProgressOf[int](ctx, q, "t"); ok || err != nil {
		t.Errorf("ProgressOf a task that reported none: %v, %v; want false, nil", ok, err)
	}
	for _, name := range []string{"", strings.Repeat("s", 129), "a\x00b"} {
		if _, err := q.Signal(ctx, "t", name, "v"); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Signal named %q: %v, want ErrInvalid", name, err)
		}
	}
	if taken, err := q.Signal(ctx, "t", strings.Repeat("s", 128), "v"); err != nil || !taken {
		t.Errorf("Signal named 128 bytes: %v, %v; want it kept", taken, err)
	}
}

// A task that waits for a signal holds no lease: it counts as waiting, not in flight; the event
// stream tells its wait, the signal and its resumption.
func TestWorkflowWaitHoldsNoLease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 100})
	got := make(chan string, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			v, err := srq.SignalValue[string](ctx, t.Delivery, "approve")
			if err != nil {
				return err
			}
			got <- v
			return nil
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitSignal("approve", 0)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "refund", &srq.PublishOpts{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to wait", func() bool {
		ti, err := q.Engine().Task(ctx, "r")
		return err == nil && ti.State == "waiting"
	})
	if st, err := q.Stats(ctx); err != nil || st.Waiting != 1 || st.InFlight != 0 || st.Pending != 0 {
		t.Errorf("stats while it waits: %+v, %v; want 1 waiting, none in flight or pending", st, err)
	}
	if taken, err := q.Signal(ctx, "r", "approve", "ok by ann"); err != nil || !taken {
		t.Fatalf("Signal: %v, %v", taken, err)
	}
	select {
	case v := <-got:
		if v != "ok by ann" {
			t.Errorf("SignalValue %q", v)
		}
	case <-ctx.Done():
		t.Fatal("the task did not resume")
	}
	evs, err := q.Engine().Events(ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventWaiting, engine.EventSignal, engine.EventResumed:
			seen = append(seen, string(ev.Kind)+" "+ev.Detail)
		}
	}
	// The signal and the resumption are written by one call, in either order.
	if len(seen) != 3 || seen[0] != "waiting sapprove" || !slices.Contains(seen, "signal approve") || !slices.Contains(seen, "resumed ") {
		t.Errorf("events %q, want waiting sapprove, then signal approve and resumed", seen)
	}
}

// A task of an ordered partition that waits for its children keeps its place: the tasks behind it
// wait, and run after it, in order. In an unordered partition they run meanwhile.
func TestWorkflowWaitingTaskAndItsPartition(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, c := newQueue[int](t, srq.QueueConfig{})
			kids, err := srq.NewQueue[int](c, srq.QueueConfig{Name: q.Name() + "-kids"})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var ran []int
			w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, t *srq.Task[int]) error {
				if t.Value == 1 {
					if _, again, _ := srq.State[bool](ctx, t.Delivery); !again {
						if _, err := srq.Spawn(ctx, t.Delivery, kids, "k", 0, nil); err != nil {
							return err
						}
						if err := t.SetState(true); err != nil {
							return err
						}
						return srq.WaitChildren()
					}
				}
				mu.Lock()
				ran = append(ran, t.Value)
				mu.Unlock()
				return nil
			}), srq.WorkerConfig{Concurrency: 4, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			var msgs []srq.Message[int]
			for i := 1; i <= 3; i++ {
				msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: "acct", Ordered: ordered}})
			}
			res, err := q.PublishBatch(ctx, msgs)
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			waitFor(t, "the first task to wait", func() bool {
				ti, err := q.Engine().Task(ctx, res[0].ID)
				return err == nil && ti.State == "waiting"
			})
			if ordered {
				// The partition is held: its two other tasks are pending, and it is neither ready
				// nor scheduled, so no fetch can hand them out.
				st, err := q.Stats(ctx)
				if err != nil || st.Pending != 2 || st.ReadyPartitions != 0 || st.ScheduledPartitions != 0 || st.Waiting != 1 {
					t.Fatalf("stats while the first task waits: %+v, %v", st, err)
				}
			}
			// A task of another partition runs: the worker is fetching.
			if _, err := q.Publish(ctx, 100, &srq.PublishOpts{Partition: "other"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the other partition's task", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.Contains(ran, 100)
			})
			mu.Lock()
			behind := slices.DeleteFunc(slices.Clone(ran), func(v int) bool { return v == 100 })
			mu.Unlock()
			if ordered && len(behind) != 0 {
				t.Fatalf("ran %v while the first task of the ordered partition waits", behind)
			}
			if !ordered {
				waitFor(t, "the unordered tasks behind the waiting one", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return slices.Contains(ran, 2) && slices.Contains(ran, 3)
				})
			}
			// The child runs; the waiting task runs again, then (ordered) the others.
			kw, err := srq.NewWorker(kids, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
				srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, kw)
			waitFor(t, "every task", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ran) == 4
			})
			mu.Lock()
			defer mu.Unlock()
			got := slices.DeleteFunc(slices.Clone(ran), func(v int) bool { return v == 100 })
			if ordered && !slices.Equal(got, []int{1, 2, 3}) {
				t.Fatalf("ran %v, want the partition's order", got)
			}
			if !ordered && !slices.Equal(got, []int{2, 3, 1}) && !slices.Equal(got, []int{3, 2, 1}) {
				t.Fatalf("ran %v, want the waiting task last", got)
			}
		})
	}
}

// A spawned child's outcome is kept 7 days after it ended by default, for its parent to read;
// SpawnOpts.Publish.KeepResult changes that.
func TestWorkflowChildOutcomeRetention(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	kw, err := srq.NewWorker(kids, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	done := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			close(done)
			return nil
		}
		if _, err := srq.Spawn(ctx, t.Delivery, kids, "default", "", nil); err != nil {
			return err
		}
		if _, err := srq.Spawn(ctx, t.Delivery, kids, "hour", "", &srq.SpawnOpts{Publish: srq.PublishOpts{KeepResult: time.Hour}}); err != nil {
			return err
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the parent did not run again")
	}
	for name, keep := range map[string]time.Duration{"default": 7 * 24 * time.Hour, "hour": time.Hour} {
		id := "p/" + name
		o, err := srq.ResultOf[string](ctx, kids, id)
		if err != nil {
			t.Fatalf("%s: %v, %v", id, o, err)
		}
		until, err := c.ZScore(ctx, kids.Engine().Keys().Outcomes(), id).Result()
		if err != nil {
			t.Fatal(err)
		}
		ended, err := c.HGet(ctx, kids.Engine().Keys().Outcome(id), "f").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(int64(until)-ended) * time.Millisecond; got != keep {
			t.Errorf("%s: kept %v after it ended, want %v", id, got, keep)
		}
	}
}

// A child's end costs its parent a counter update, never a scan of its siblings: the Redis
// commands per child, scripts' included, do not grow from 20 children to 400.
func TestWorkflowChildEndCostDoesNotGrowWithSiblings(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "INFO commandstats of a server of its own")
	c := srv.Client(t)
	ctx := testCtx(t)
	perChild := map[int]float64{}
	for _, n := range []int{20, 400} {
		q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: fmt.Sprintf("cost-%d", n)})
		if err != nil {
			t.Fatal(err)
		}
		var again atomic.Bool
		w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, t *srq.Task[int]) error {
			if t.Value >= 0 {
				return nil // a child
			}
			if _, ok, _ := srq.State[bool](ctx, t.Delivery); ok {
				again.Store(true)
				return nil
			}
			kids := make([]srq.Spawned[int], n)
			for i := range kids {
				kids[i] = srq.Spawned[int]{Name: fmt.Sprint(i), Value: i}
			}
			if _, err := srq.SpawnBatch(ctx, t.Delivery, q, kids); err != nil {
				return err
			}
			if err := t.SetState(true); err != nil {
				return err
			}
			return srq.WaitChildren()
		}), srq.WorkerConfig{Logger: quiet, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Publish(ctx, -1, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := w.RunOnce(ctx); err != nil { // the parent spawns and waits
			t.Fatal(err)
		}
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for !again.Load() { // the children, then the parent again
			if _, err := w.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("the parent did not run again")
			}
		}
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, s := range redistest.ParseCommandStats(info) {
			total += s.Calls
		}
		perChild[n] = float64(total) / float64(n)
	}
	if perChild[400] > 1.25*perChild[20] {
		t.Fatalf("Redis commands per child: %.1f with 20 children, %.1f with 400", perChild[20], perChild[400])
	}
	t.Logf("Redis commands per child: %.1f with 20 children, %.1f with 400", perChild[20], perChild[400])
}

// A signal sent after one of the same name ended the task's wait, before the task runs again, is
// kept for its next wait: the task reads the first, and its next wait ends at once with the second.
func TestSignalAfterItsWaitEndedIsKept(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	var got []string
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if st > 0 {
			v, err := srq.SignalValue[string](ctx, t.Delivery, "go")
			if err != nil {
				return err
			}
			got = append(got, v)
		}
		if st == 2 {
			return nil
		}
		if err := t.SetState(st + 1); err != nil {
			return err
		}
		return srq.WaitSignal("go", 0)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil { // it waits for go
		t.Fatal(err)
	}
	for _, v := range []string{"first", "second"} {
		if taken, err := q.Signal(ctx, "x", "go", v); err != nil || !taken {
			t.Fatalf("Signal %s: %v, %v", v, taken, err)
		}
	}
	for range 2 { // it reads first and waits again; that wait ends at once
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("the task read %q, want first then second", got)
	}
}

// A signal sent while a task is in its retry backoff is kept for its next wait, and does not cut
// the backoff short, also when its last wait was for that signal.
func TestSignalDuringRetryBackoffIsKept(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, waited, _ := srq.State[bool](ctx, t.Delivery); waited {
			return errors.New("fails after the signal: retried in an hour")
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitSignal("go", 0)
	}), srq.WorkerConfig{Logger: quiet, Retry: srq.ExponentialBackoff(time.Hour, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil { // it waits for go
		t.Fatal(err)
	}
	if _, err := q.Signal(ctx, "x", "go", "first"); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 { // it fails: back in an hour
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	if taken, err := q.Signal(ctx, "x", "go", "second"); err != nil || !taken {
		t.Fatalf("Signal during the backoff: %v, %v", taken, err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce during the backoff ran %d tasks (%v), want none", n, err)
	}
}

// A run that fails after a wait is retried with the state of that wait: a state set by a run that
// does not wait is not kept.
func TestWorkflowRetryKeepsTheLastWaitsState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	states := make(chan int, 4)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		states <- st
		switch {
		case st == 0:
			if err := t.SetState(99); err != nil {
				return err
			}
			if err := t.SetState(1); err != nil { // replaces 99
				return err
			}
			return srq.Sleep(0)
		case t.Attempt == 1:
			if err := t.SetState(2); err != nil {
				return err
			}
			return errors.New("fails after setting a state")
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Retry: srq.ExponentialBackoff(10*time.Millisecond, 10*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "x", nil); err != nil {
		t.Fatal(err)
	}
	var got []int
	for len(got) < 3 {
		select {
		case st := <-states:
			got = append(got, st)
		case <-ctx.Done():
			t.Fatalf("runs saw states %v", got)
		}
	}
	if !slices.Equal(got, []int{0, 1, 1}) {
		t.Fatalf("runs saw states %v, want 0, then 1 (after the wait), then 1 again (the retry)", got)
	}
}

// Once a child spawned with FailDependents has failed, every wait for the children ends at once:
// the parent runs again while its other children still run.
func TestWorkflowWaitAfterAFailedChildEndsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	release := make(chan struct{})
	defer close(release)
	runs := make(chan []srq.Child, 4)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		switch t.Value {
		case "bad":
			return srq.Permanent(errors.New("no"))
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if st == 0 {
			for _, name := range []string{"bad", "slow"} {
				if _, err := srq.Spawn(ctx, t.Delivery, q, name, name, nil); err != nil {
					return err
				}
			}
		} else {
			cs, err := t.Children(ctx)
			if err != nil {
				return err
			}
			runs <- cs
			if st == 2 {
				return nil
			}
		}
		if err := t.SetState(st + 1); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Concurrency: 4, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "parent", nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		select {
		case cs := <-runs:
			if len(cs) != 2 || cs[0].State != "dead" || cs[1].State != "pending" {
				t.Fatalf("run %d after a wait: children %+v, want bad dead and slow running", i, cs)
			}
		case <-ctx.Done():
			t.Fatalf("no run %d after a wait", i)
		}
	}
}

// Cancelling a task that waits for a signal in an ordered partition ends it, and the partition
// goes on with the task behind it.
func TestWorkflowCancelWaitingTaskReleasesItsPartition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		wait  func() error
		state engine.State // of the waiting task
	}{
		{"signal", func() error { return srq.WaitSignal("go", 0) }, engine.StateWaiting},
		{"signal with a timeout", func() error { return srq.WaitSignal("go", time.Hour) }, engine.StatePending},
		{"sleep", func() error { return srq.Sleep(time.Hour) }, engine.StatePending},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[string](t, srq.QueueConfig{})
			ran := make(chan string, 4)
			w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
				ran <- t.Value
				if t.Value == "first" {
					return c.wait()
				}
				return nil
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			opts := srq.PublishOpts{Partition: "acct", Ordered: true, KeepResult: time.Hour}
			res, err := q.PublishBatch(ctx, []srq.Message[string]{{Value: "first", Opts: opts}, {Value: "second", Opts: opts}})
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			if v := <-ran; v != "first" {
				t.Fatalf("ran %q first", v)
			}
			waitFor(t, "the first task to wait", func() bool {
				ti, err := q.Engine().Task(ctx, res[0].ID)
				return err == nil && ti.State == c.state
			})
			if err := q.Cancel(ctx, res[0].ID); err != nil {
				t.Fatal(err)
			}
			select {
			case v := <-ran:
				if v != "second" {
					t.Fatalf("ran %q after the cancel, want second", v)
				}
			case <-ctx.Done():
				t.Fatal("the partition did not go on after the cancel")
			}
			if _, err := q.Signal(ctx, res[0].ID, "go", ""); !errors.Is(err, srq.ErrNotFound) {
				t.Errorf("Signal to the cancelled task: %v, want ErrNotFound", err)
			}
			var failed *srq.TaskFailedError
			if _, err := srq.ResultOf[string](ctx, q, res[0].ID); !errors.As(err, &failed) || failed.State != "cancelled" {
				t.Errorf("the cancelled task's outcome: %v, want cancelled", err)
			}
		})
	}
}

// A signal sent to a task before its first run is kept: the task's wait for it ends at once, and
// the task is never parked.
func TestSignalBeforeTheFirstRunIsKept(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 100})
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if taken, err := q.Signal(ctx, "x", "go", "early"); err != nil || !taken {
		t.Fatalf("Signal to a pending task: %v, %v", taken, err)
	}
	got := make(chan string, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			v, err := srq.SignalValue[string](ctx, t.Delivery, "go")
			if err != nil {
				return err
			}
			got <- v
			return nil
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitSignal("go", 0)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	select {
	case v := <-got:
		if v != "early" {
			t.Errorf("SignalValue %q", v)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end")
	}
	evs, err := q.Engine().Events(ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == engine.EventWaiting {
			t.Errorf("the task was parked: %+v", ev)
		}
	}
}

// A signal that comes after its wait timed out, while the task runs again, is kept for the next
// wait, which ends at once with it.
func TestSignalAfterATimeoutIsKeptForTheNextWait(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	type run struct {
		value string
		err   error
	}
	runs := make(chan run, 4)
	running, sent := make(chan struct{}), make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		if st > 0 {
			var r run
			r.value, r.err = srq.SignalValue[string](ctx, t.Delivery, "go")
			runs <- r
		}
		switch st {
		case 1: // timed out: the test signals while this run goes on
			close(running)
			<-sent
		case 2:
			return nil
		}
		if err := t.SetState(st + 1); err != nil {
			return err
		}
		return srq.WaitSignal("go", 100*time.Millisecond)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the task did not run after its timeout")
	}
	if taken, err := q.Signal(ctx, "x", "go", "late"); err != nil || !taken {
		t.Fatalf("Signal: %v, %v", taken, err)
	}
	close(sent)
	for i, want := range []run{{"", srq.ErrSignalTimeout}, {"late", nil}} {
		select {
		case r := <-runs:
			if r.value != want.value || !errors.Is(r.err, want.err) {
				t.Errorf("run %d: %q, %v; want %q, %v", i+2, r.value, r.err, want.value, want.err)
			}
		case <-ctx.Done():
			t.Fatalf("no run %d", i+2)
		}
	}
}

// A task's progress is told on the event stream with the value as its queue's codec encodes it.
func TestWorkflowProgressEventDetail(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 100})
	reported := make(chan error, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		reported <- t.Progress(ctx, map[string]int{"rows": 1200})
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "import", &srq.PublishOpts{ID: "imp"}); err != nil {
		t.Fatal(err)
	}
	if err := <-reported; err != nil {
		t.Fatal(err)
	}
	want, err := codec.MsgPack{}.Marshal(map[string]int{"rows": 1200})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := q.Engine().Events(ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == engine.EventProgress {
			if ev.ID != "imp" || ev.Detail != string(want) {
				t.Errorf("progress event %+v, want Detail %q", ev, want)
			}
			return
		}
	}
	t.Fatal("no progress event")
}

// A flow step's handler spawns children and waits for them like any handler; the flow goes on
// when the step, done with its children, succeeds.
func TestWorkflowFlowStepSpawns(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	kw, err := srq.NewWorker(kids, srq.ResultHandlerFunc[string, string](func(_ context.Context, t *srq.Task[string]) (string, error) {
		return "k" + t.Value, nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[string, string](func(ctx context.Context, t *srq.Task[string]) (string, error) {
		if t.Step() == "b" {
			r, err := srq.ParentResult[string](ctx, t.Delivery, "a")
			return "b after " + r, err
		}
		if _, again, err := srq.State[bool](ctx, t.Delivery); err != nil {
			return "", err
		} else if again {
			rs, err := srq.ChildResults[string](ctx, t.Delivery)
			return rs["x"] + rs["y"], err
		}
		for _, name := range []string{"x", "y"} {
			if _, err := srq.Spawn(ctx, t.Delivery, kids, name, name, nil); err != nil {
				return "", err
			}
		}
		if err := t.SetState(true); err != nil {
			return "", err
		}
		return "", srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	a := q.Step("a", "a", nil)
	b := q.Step("b", "b", nil).After(a)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: []*srq.Step{a, b}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flow to complete", func() bool {
		f, err := q.Flow(ctx, "f")
		return err == nil && f.State == srq.FlowCompleted
	})
	if r, err := srq.ResultOf[string](ctx, q, "f/b"); err != nil || r != "b after kxky" {
		t.Fatalf("the last step's result: %q, %v", r, err)
	}
}

// A signal sent while the task waits for something else (its children) is kept, and ends its
// next wait for that name at once.
func TestSignalWhileWaitingForChildrenIsKept(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		switch st {
		case 0:
			if _, err := srq.Spawn(ctx, t.Delivery, kids, "k", "k", nil); err != nil {
				return err
			}
			if err := t.SetState(1); err != nil {
				return err
			}
			return srq.WaitChildren()
		case 1:
			if err := t.SetState(2); err != nil {
				return err
			}
			return srq.WaitSignal("go", 0)
		}
		v, err := srq.SignalValue[string](ctx, t.Delivery, "go")
		if err != nil {
			return err
		}
		got <- v
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to wait for its child", func() bool {
		ti, err := q.Engine().Task(ctx, "p")
		return err == nil && ti.State == "waiting"
	})
	if taken, err := q.Signal(ctx, "p", "go", "now"); err != nil || !taken {
		t.Fatalf("signal while it waits for its child: %v, %v", taken, err)
	}
	if ti, err := q.Engine().Task(ctx, "p"); err != nil || ti.State != "waiting" {
		t.Fatalf("the signal ended the wait for the child: %+v, %v", ti, err)
	}
	kw, err := srq.NewWorker(kids, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	select {
	case v := <-got:
		if v != "now" {
			t.Fatalf("the signal read %q, want now", v)
		}
	case <-ctx.Done():
		t.Fatal("the wait for the kept signal did not end")
	}
}

// Once a child's outcome is no longer kept (past its KeepResult), ChildResult and ChildResults
// report it with an error wrapping ErrNotFound (workflows.md).
func TestWorkflowChildOutcomeGone(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	type read struct{ one, all error }
	got := make(chan read, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Value == "child" {
			return nil
		}
		if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
			var r read
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, r.one = srq.ChildResult[string](ctx, t.Delivery, "brief"); errors.Is(r.one, srq.ErrNotFound) {
					break
				}
			}
			_, r.all = srq.ChildResults[string](ctx, t.Delivery)
			got <- r
			return nil
		}
		if _, err := srq.Spawn(ctx, t.Delivery, q, "brief", "child", &srq.SpawnOpts{Publish: srq.PublishOpts{KeepResult: 50 * time.Millisecond}}); err != nil {
			return err
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "parent", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if !errors.Is(r.one, srq.ErrNotFound) || !errors.Is(r.all, srq.ErrNotFound) {
			t.Errorf("a child whose outcome is gone: ChildResult %v, ChildResults %v; want both ErrNotFound", r.one, r.all)
		}
	case <-ctx.Done():
		t.Fatal("the parent did not run again")
	}
}

// A signal sent once a wait's time has run out, before any worker took the task again, comes too
// late for that wait: the next run reads ErrSignalTimeout, and the signal is kept for its next
// wait (workflows.md), in an unordered and in an ordered partition.
func TestSignalAfterTheTimeoutBeforeTheNextRun(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered-", ordered), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[string](t, srq.QueueConfig{})
			type run struct {
				value string
				err   error
			}
			var runs []run
			w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
				st, _, err := srq.State[int](ctx, t.Delivery)
				if err != nil {
					return err
				}
				if st > 0 {
					var r run
					r.value, r.err = srq.SignalValue[string](ctx, t.Delivery, "go")
					runs = append(runs, r)
				}
				if st == 2 {
					return nil
				}
				if err := t.SetState(st + 1); err != nil {
					return err
				}
				if st == 0 {
					return srq.WaitSignal("go", 100*time.Millisecond)
				}
				return srq.WaitSignal("go", 0) // the kept signal ends it at once
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x", Partition: "p", Ordered: ordered}); err != nil {
				t.Fatal(err)
			}
			c := redistest.Client(t)
			if n, err := w.RunOnce(ctx); err != nil || n != 1 {
				t.Fatalf("run 1: %d, %v", n, err)
			}
			waited, err := c.Time(ctx).Result() // the wait of 100 ms began before this
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the wait's time to run out", func() bool {
				now, err := c.Time(ctx).Result()
				return err == nil && now.After(waited.Add(150*time.Millisecond))
			})
			if taken, err := q.Signal(ctx, "x", "go", "late"); err != nil || !taken {
				t.Fatalf("Signal: %v, %v", taken, err)
			}
			for range 2 {
				if _, err := w.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			want := []run{{"", srq.ErrSignalTimeout}, {"late", nil}}
			if len(runs) != 2 {
				t.Fatalf("runs after the first: %+v, want 2", runs)
			}
			for i := range want {
				if runs[i].value != want[i].value || !errors.Is(runs[i].err, want[i].err) {
					t.Errorf("run %d: %q, %v; want %q, %v", i+2, runs[i].value, runs[i].err, want[i].value, want[i].err)
				}
			}
		})
	}
}

// Progress on a delivery whose task has ended (acked: gone) fails with ErrNotFound; while the task
// lives on under another delivery, with ErrStaleToken (Delivery.Progress, errors.md).
func TestProgressOfAnEndedDelivery(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	var first, second *srq.Delivery
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if first == nil {
			first = t.Delivery
			return srq.Snooze(0) // back at once, no attempt used: the next run is another delivery
		}
		second = t.Delivery
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := first.Progress(ctx, 1); !errors.Is(err, srq.ErrStaleToken) {
		t.Errorf("Progress of a delivery whose lease ended, the task pending: %v, want ErrStaleToken", err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 || second == nil {
		t.Fatal(n, err)
	}
	if err := second.Progress(ctx, 2); !errors.Is(err, srq.ErrNotFound) {
		t.Errorf("Progress of an acked task's delivery: %v, want ErrNotFound", err)
	}
}

// WaitSignal with a negative timeout waits without limit, as with 0: the task is parked (waiting,
// no available-at), not pending until a time (workflows.md).
func TestWaitSignalNegativeTimeoutWaitsWithoutLimit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
		return srq.WaitSignal("go", -time.Second)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if ti, err := q.Engine().Task(ctx, "x"); err != nil || ti.State != "waiting" {
		t.Fatalf("after a wait with a negative timeout: %+v, %v; want it waiting", ti, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Waiting != 1 || st.Pending != 0 {
		t.Fatalf("stats: %+v, %v; want 1 waiting, none pending", st, err)
	}
}
