package srq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

type lineItem struct {
	Order string
	SKU   string
	Qty   int
}

type priced struct{ Cents int }

// stage is the state an order's parent keeps between its runs.
type stage struct{ Step int }

// A parent spawns 3 typed children on 2 queues, waits, reads their results, spawns 2 more, waits
// again and completes; its state carries it from run to run, and no child runs twice.
func TestWorkflowSpawnWaitAndSpawnAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	orders, c := newQueue[order](t, srq.QueueConfig{})
	items, err := srq.NewQueue[lineItem](c, srq.QueueConfig{Name: orders.Name() + "-items"})
	if err != nil {
		t.Fatal(err)
	}
	var childRuns sync.Map // id -> runs
	iw, err := srq.NewWorker(items, srq.ResultHandlerFunc[lineItem, priced](func(ctx context.Context, t *srq.Task[lineItem]) (priced, error) {
		n, _ := childRuns.LoadOrStore(t.ID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return priced{Cents: 100 * t.Value.Qty}, nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var parentRuns atomic.Int64
	done := make(chan int, 1)
	ow, err := srq.NewWorker(orders, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if t.Value.User == "audit" {
			return nil // a child of this queue
		}
		parentRuns.Add(1)
		st, _, err := srq.State[stage](ctx, t.Delivery)
		if err != nil {
			return err
		}
		switch st.Step {
		case 0:
			// Two children on the items queue, one on this queue (another payload type).
			res, err := srq.SpawnBatch(ctx, t.Delivery, items, []srq.Spawned[lineItem]{
				{Name: "a", Value: lineItem{Order: t.Value.User, SKU: "a", Qty: 1}},
				{Name: "b", Value: lineItem{Order: t.Value.User, SKU: "b", Qty: 2}},
			})
			if err != nil || len(res) != 2 || res[0].ID != t.ID+"/a" {
				return fmt.Errorf("spawn: %v %v", res, err)
			}
			if _, err := srq.Spawn(ctx, t.Delivery, orders, "audit", order{User: "audit"}, nil); err != nil {
				return err
			}
			if err := t.SetState(stage{Step: 1}); err != nil {
				return err
			}
			return srq.WaitChildren()
		case 1:
			got, err := srq.ChildResults[priced](ctx, t.Delivery)
			if err != nil {
				return fmt.Errorf("children of the first wait: %w", err)
			}
			if got["a"].Cents != 100 || got["b"].Cents != 200 {
				return srq.Permanent(fmt.Errorf("first results %v", got))
			}
			for _, name := range []string{"c", "d"} {
				if _, err := srq.Spawn(ctx, t.Delivery, items, name, lineItem{SKU: name, Qty: 3}, nil); err != nil {
					return err
				}
			}
			if err := t.SetState(stage{Step: 2}); err != nil {
				return err
			}
			return srq.WaitChildren()
		default:
			got, err := srq.ChildResults[priced](ctx, t.Delivery)
			if err != nil {
				return err
			}
			total := 0
			for name, p := range got {
				if name != "audit" {
					total += p.Cents
				}
			}
			done <- total
			return nil
		}
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, iw)
	runWorker(t, ow)
	if _, err := orders.Publish(ctx, order{User: "ann"}, &srq.PublishOpts{ID: "order-1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case total := <-done:
		if total != 100+200+300+300 {
			t.Fatalf("total %d, want 900", total)
		}
	case <-ctx.Done():
		t.Fatal("the parent never completed")
	}
	childRuns.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("child %v ran %d times", k, n)
		}
		return true
	})
	waitFor(t, "the parent's ack", func() bool {
		_, err := orders.Engine().Task(ctx, "order-1")
		return errors.Is(err, srq.ErrNotFound)
	})
}

// A worker of Concurrency 1 runs a parent that waits for 100 children of its own queue: waiting
// takes no slot, so the children run and the parent completes.
func TestWorkflowWaitTakesNoSlot(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[lineItem](t, srq.QueueConfig{})
	done := make(chan int, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[lineItem](func(ctx context.Context, t *srq.Task[lineItem]) error {
		if t.Value.SKU != "parent" {
			return t.SetResult(priced{Cents: t.Value.Qty})
		}
		if _, spawned, err := srq.State[bool](ctx, t.Delivery); err != nil || spawned {
			got, err := srq.ChildResults[priced](ctx, t.Delivery)
			if err != nil {
				return err
			}
			sum := 0
			for _, p := range got {
				sum += p.Cents
			}
			done <- sum
			return nil
		}
		kids := make([]srq.Spawned[lineItem], 100)
		for i := range kids {
			kids[i] = srq.Spawned[lineItem]{Name: fmt.Sprint(i), Value: lineItem{SKU: "child", Qty: i}}
		}
		if _, err := srq.SpawnBatch(ctx, t.Delivery, q, kids); err != nil {
			return err
		}
		if err := t.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, lineItem{SKU: "parent"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case sum := <-done:
		if sum != 99*100/2 {
			t.Fatalf("sum %d", sum)
		}
	case <-ctx.Done():
		t.Fatal("the parent never completed: a waiting parent held the only slot?")
	}
}

// A child that dies ends its parent's wait at once (FailDependents), and the parent sees the
// failure; with ContinueDependents the parent waits for the others and sees which failed.
func TestWorkflowChildFailure(t *testing.T) {
	t.Parallel()
	for _, policy := range []srq.FailurePolicy{srq.FailDependents, srq.ContinueDependents} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[lineItem](t, srq.QueueConfig{})
			release := make(chan struct{})
			seen := make(chan []srq.Child, 1)
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
					return nil
				case "parent":
				default:
					return nil
				}
				if _, again, _ := srq.State[bool](ctx, t.Delivery); again {
					cs, err := t.Children(ctx)
					if err != nil {
						return err
					}
					seen <- cs
					return nil
				}
				opts := &srq.SpawnOpts{Policy: policy}
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
			if policy == srq.ContinueDependents {
				// The parent waits for slow; let it go once bad is dead.
				waitFor(t, "bad to die", func() bool {
					st, _ := q.Stats(ctx)
					return st.Dead == 1
				})
				select {
				case cs := <-seen:
					t.Fatalf("the parent ran before every child ended: %+v", cs)
				default:
				}
				close(release)
			}
			var cs []srq.Child
			select {
			case cs = <-seen:
			case <-ctx.Done():
				t.Fatal("the parent did not run again")
			}
			states := map[string]string{}
			for _, c := range cs {
				states[c.Name] = c.State
			}
			if states["bad"] != "dead" {
				t.Fatalf("children %+v: bad is not dead", cs)
			}
			if policy == srq.FailDependents && states["slow"] != "pending" {
				t.Fatalf("children %+v: with FailDependents the parent runs while slow still runs", cs)
			}
			if policy == srq.ContinueDependents && states["slow"] != "succeeded" {
				t.Fatalf("children %+v: with ContinueDependents the parent runs after slow", cs)
			}
			if policy == srq.FailDependents {
				close(release)
			}
		})
	}
}

// Signals: one sent before the wait ends it at once; one sent during it resumes the task; a second
// of a name the task keeps changes nothing; a wait whose time runs out reports ErrSignalTimeout,
// and a signal after that is kept for the next wait.
func TestWorkflowSignals(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{})
	type run struct {
		step  int
		value string
		err   error
	}
	runs := make(chan run, 16)
	gate := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		st, _, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return err
		}
		r := run{step: st}
		if st > 0 {
			r.value, r.err = srq.SignalValue[string](ctx, t.Delivery, "approve")
		}
		runs <- r
		if st == 0 {
			<-gate // the test sends a signal before the wait
		}
		if st == 3 {
			return nil
		}
		if err := t.SetState(st + 1); err != nil {
			return err
		}
		timeout := time.Duration(0)
		if st == 1 {
			timeout = 300 * time.Millisecond
		}
		return srq.WaitSignal("approve", timeout)
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "refund", &srq.PublishOpts{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
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
	if r := next(); r.step != 0 {
		t.Fatalf("first run %+v", r)
	}
	// Before the wait: kept, and a second of the name changes nothing.
	if taken, err := q.Signal(ctx, "r1", "approve", "early"); err != nil || !taken {
		t.Fatalf("signal before the wait: %v, %v", taken, err)
	}
	if taken, err := q.Signal(ctx, "r1", "approve", "twice"); err != nil || taken {
		t.Fatalf("a second signal of the name: %v, %v; want not taken", taken, err)
	}
	close(gate)
	if r := next(); r.step != 1 || r.value != "early" || r.err != nil {
		t.Fatalf("the wait after the signal: %+v, want the early value at once", r)
	}
	// A wait of 300ms with no signal: it times out.
	if r := next(); r.step != 2 || !errors.Is(r.err, srq.ErrSignalTimeout) {
		t.Fatalf("after the timeout: %+v, want ErrSignalTimeout", r)
	}
	// The task now waits with no time limit: a signal resumes it.
	waitFor(t, "the task to wait", func() bool {
		ti, err := q.Engine().Task(ctx, "r1")
		return err == nil && ti.State == "waiting"
	})
	if taken, err := q.Signal(ctx, "r1", "approve", "yes"); err != nil || !taken {
		t.Fatalf("signal during the wait: %v, %v", taken, err)
	}
	if r := next(); r.step != 3 || r.value != "yes" || r.err != nil {
		t.Fatalf("after the signal: %+v", r)
	}
	waitFor(t, "the task's ack", func() bool {
		_, err := q.Signal(ctx, "r1", "approve", "late")
		return errors.Is(err, srq.ErrNotFound)
	})
}

// A sleep on an ordered partition keeps the partition's order: the tasks behind the sleeping one
// wait for it, and run after it, in order.
func TestWorkflowSleepKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[int](t, srq.QueueConfig{})
	var mu sync.Mutex
	var ran []int
	slept := time.Duration(0)
	var start time.Time
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, t *srq.Task[int]) error {
		if t.Value == 1 {
			if _, woke, _ := srq.State[bool](ctx, t.Delivery); !woke {
				start = time.Now()
				if err := t.SetState(true); err != nil {
					return err
				}
				return srq.Sleep(2 * time.Second)
			}
			slept = time.Since(start)
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
	for i := 1; i <= 5; i++ {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: "acct", Ordered: true}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "every task", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == 5
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("ran %v, want the partition's order", ran)
	}
	if slept < 2*time.Second {
		t.Fatalf("the sleep lasted %v", slept)
	}
}

// Cancelling a waiting parent cancels its children that have not ended.
func TestWorkflowCancelWaitingParent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		for _, n := range []string{"x", "y"} {
			if _, err := srq.Spawn(ctx, t.Delivery, kids, n, n, nil); err != nil {
				return err
			}
		}
		return srq.WaitChildren()
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w) // no worker on kids: the children stay pending
	if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parent to wait", func() bool {
		ti, err := q.Engine().Task(ctx, "p")
		return err == nil && ti.State == "waiting"
	})
	if err := q.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p/x", "p/y"} {
		waitFor(t, id+" to be cancelled", func() bool {
			_, err := srq.ResultOf[string](ctx, kids, id)
			var failed *srq.TaskFailedError
			return errors.As(err, &failed) && failed.State == "cancelled"
		})
	}
	if st, err := kids.Stats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("kids after the cancel: %+v, %v", st, err)
	}
}

// A task's progress is kept for ProgressOf and told on the event stream.
func TestWorkflowProgress(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[string](t, srq.QueueConfig{Events: 100})
	reported := make(chan struct{})
	finish := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if err := t.Progress(ctx, 40); err != nil {
			return err
		}
		close(reported)
		<-finish
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if _, err := q.Publish(ctx, "import", &srq.PublishOpts{ID: "imp"}); err != nil {
		t.Fatal(err)
	}
	<-reported
	if p, ok, err := srq.ProgressOf[int](ctx, q, "imp"); err != nil || !ok || p != 40 {
		t.Fatalf("ProgressOf: %v %v %v", p, ok, err)
	}
	close(finish)
	evs, err := q.Engine().Events(ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, string(ev.Kind))
	}
	sort.Strings(kinds)
	if _, found := slices.BinarySearch(kinds, "progress"); !found {
		t.Fatalf("events %v: no progress", kinds)
	}
}

// A parent purged from the dead letters forgets its children: a child that ends later leaves no
// record of the parent behind.
func TestWorkflowPurgedParentForgetsChildren(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[string](t, srq.QueueConfig{})
	kids, err := srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if _, err := srq.Spawn(ctx, t.Delivery, kids, "k", "k", nil); err != nil {
			return err
		}
		return srq.Permanent(errors.New("gave up"))
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, pw)
	if _, err := q.Publish(ctx, "p", &srq.PublishOpts{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parent to die", func() bool {
		st, _ := q.Stats(ctx)
		return st.Dead == 1
	})
	if n, err := q.Purge(ctx, "p"); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	kw, err := srq.NewWorker(kids, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, kw)
	waitFor(t, "the child to end", func() bool {
		_, err := srq.ResultOf[string](ctx, kids, "p/k")
		return err == nil
	})
	// The child's end reached the parent's slot through the relay, and found nothing to count.
	waitFor(t, "the outbox to drain", func() bool {
		n, err := c.ZCard(ctx, q.Engine().Keys().Base()+"fo").Result()
		m, err2 := c.ZCard(ctx, kids.Engine().Keys().Base()+"fo").Result()
		return err == nil && err2 == nil && n == 0 && m == 0
	})
	for _, key := range []string{q.Engine().Keys().Task("p"), q.Engine().Keys().Base() + "fk:p"} {
		if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Errorf("%s exists after the parent was purged: %d, %v", key, n, err)
		}
	}
}

// A parent published again with its id, after it completed, spawns children of names it used
// before: they are duplicates, and it reads what they left (their outcomes are kept), in its
// queue and in another.
func TestWorkflowParentPublishedAgain(t *testing.T) {
	t.Parallel()
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprint("other queue ", other), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, c := newQueue[string](t, srq.QueueConfig{})
			kids := q
			if other {
				var err error
				kids, err = srq.NewQueue[string](c, srq.QueueConfig{Name: q.Name() + "-kids"})
				if err != nil {
					t.Fatal(err)
				}
			}
			type out struct {
				dup bool
				res map[string]string
				err error
			}
			done := make(chan out, 4)
			var lastDup atomic.Bool
			h := srq.HandlerFunc[string](func(ctx context.Context, tk *srq.Task[string]) error {
				if tk.Value == "child" {
					return tk.SetResult("r-" + tk.ID)
				}
				if _, again, _ := srq.State[bool](ctx, tk.Delivery); !again {
					res, err := srq.Spawn(ctx, tk.Delivery, kids, "c", "child", nil)
					if err != nil {
						return err
					}
					lastDup.Store(res.Duplicate)
					if err := tk.SetState(true); err != nil {
						return err
					}
					return srq.WaitChildren()
				}
				res, err := srq.ChildResults[string](ctx, tk.Delivery)
				done <- out{lastDup.Load(), res, err}
				return nil
			})
			served := []srq.Served{srq.Serve(q, h, nil)}
			if other {
				served = append(served, srq.Serve(kids, h, nil))
			}
			w, err := srq.NewWorkerOf(srq.WorkerConfig{Logger: quiet}, served...)
			if err != nil {
				t.Fatal(err)
			}
			runWorker(t, w)
			for round := 1; round <= 2; round++ {
				if _, err := q.Publish(ctx, "parent", &srq.PublishOpts{ID: "p1"}); err != nil {
					t.Fatal(err)
				}
				select {
				case o := <-done:
					if o.dup != (round == 2) || o.err != nil || len(o.res) != 1 || o.res["c"] != "r-p1/c" {
						t.Fatalf("round %d: spawn duplicate %v, results %v, err %v", round, o.dup, o.res, o.err)
					}
				case <-time.After(30 * time.Second):
					ti, err := q.Engine().Task(ctx, "p1")
					wf, _ := q.Engine().WorkflowOf(ctx, "p1")
					cs, _ := q.Engine().Children(ctx, "p1")
					t.Fatalf("round %d: the parent did not complete in 30 s: %+v %v; workflow %+v; children %+v", round, ti.State, err, wf, cs)
				}
				waitFor(t, "p1 acked", func() bool { _, err := q.Engine().Task(ctx, "p1"); return err != nil })
			}
		})
	}
}
