package srq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/lua"
)

// callWatch is a go-redis hook that counts the script calls a client makes, by script name,
// signals each BLPOP (a worker's fetcher waiting in Redis for work) on blpop, without blocking,
// and keeps the most BLPOPs it saw under way at once.
type callWatch struct {
	mu               sync.Mutex
	scripts          map[string]int    // script name -> calls
	names            map[string]string // SHA1 -> script name
	blpop            chan struct{}
	blpops, blpopMax int
}

func newCallWatch(t *testing.T) *callWatch {
	t.Helper()
	h := &callWatch{scripts: map[string]int{}, names: map[string]string{}, blpop: make(chan struct{}, 1)}
	for _, name := range lua.Names() {
		src, err := lua.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		h.names[lua.SHA1(src)] = name
		h.names[lua.Function(engine.LibraryName(), name)] = name
	}
	return h
}

func (h *callWatch) saw(cmd redis.Cmder) {
	switch args := cmd.Args(); strings.ToLower(cmd.Name()) {
	case "evalsha", "fcall", "fcall_ro":
		h.mu.Lock()
		h.scripts[h.names[fmt.Sprint(args[1])]]++
		h.mu.Unlock()
	case "blpop":
		select {
		case h.blpop <- struct{}{}:
		default:
		}
	}
}

func (h *callWatch) calls(script string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scripts[script]
}

func (h *callWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *callWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.saw(cmd)
		if strings.EqualFold(cmd.Name(), "blpop") {
			h.mu.Lock()
			h.blpops++
			h.blpopMax = max(h.blpopMax, h.blpops)
			h.mu.Unlock()
			defer func() {
				h.mu.Lock()
				h.blpops--
				h.mu.Unlock()
			}()
		}
		return next(ctx, cmd)
	}
}

// mostBlpops returns the most BLPOPs seen under way at once.
func (h *callWatch) mostBlpops() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blpopMax
}

func (h *callWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.saw(cmd)
		}
		return next(ctx, cmds)
	}
}

// watchedQueue returns a queue of T on a fresh queue name whose client reports to a callWatch.
func watchedQueue[T any](t *testing.T) (*srq.Queue[T], *callWatch) {
	t.Helper()
	q, c := newQueue[T](t, srq.QueueConfig{})
	h := newCallWatch(t)
	c.AddHook(h)
	return q, h
}

// TestBusyWorkerAcksAlongWithFetches: while a worker has work, its acks go out with its fetches
// (ack_fetch.lua), one call for both; ack.lua serves only the acks that finish while its fetcher
// waits for work, at the end.
func TestBusyWorkerAcksAlongWithFetches(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, calls := watchedQueue[int](t)
	const tasks, concurrency = 1000, 4
	msgs := make([]srq.Message[int], tasks)
	for i := range msgs {
		msgs[i] = srq.Message[int]{Value: i, Opts: srq.PublishOpts{Partition: fmt.Sprint(i % 100)}}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil }),
		srq.WorkerConfig{Concurrency: concurrency, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every task acked", func() bool {
		s, err := q.Engine().Stats(ctx)
		return err == nil && s.Acked == tasks && s.InFlight == 0
	})
	stop()
	// At the end, each handler still running when the fetcher found nothing acks on its own: at
	// most Concurrency plus Prefetch (4 + 4) calls. Before the acks rode along, the acker sent
	// one call per batch throughout.
	if n := calls.calls("ack"); n > 2*concurrency {
		t.Errorf("%d ack.lua calls for %d tasks (%d ack_fetch.lua calls), want at most %d",
			n, tasks, calls.calls("ack_fetch"), 2*concurrency)
	}
	if calls.calls("ack_fetch") == 0 {
		t.Error("no ack_fetch.lua call: no ack went along with a fetch")
	}
}

// TestIdleWorkerAcksAtOnce: a task that finishes while the worker's fetcher waits in Redis for
// work (here with a PollWait of 10 minutes) is acked at once, not with the next fetch.
func TestIdleWorkerAcksAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, calls := watchedQueue[int](t)
	release := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, _ *srq.Task[int]) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}), srq.WorkerConfig{Concurrency: 2, PollWait: 10 * time.Minute, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	<-calls.blpop // waiting for work
	if _, err := q.Publish(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task running", func() bool {
		s, err := q.Engine().Stats(ctx)
		return err == nil && s.InFlight == 1
	})
	// After fetching the task the fetchers look again, find nothing and wait, one in Redis and one
	// for it: release the handler only then, when no fetcher would take its ack along. Two BLPOPs
	// after this point are a whole MaxBlock (1s) apart, past the fetchers' last look.
	select {
	case <-calls.blpop:
	default:
	}
	<-calls.blpop
	<-calls.blpop
	close(release)
	waitFor(t, "the task acked", func() bool {
		s, err := q.Engine().Stats(ctx)
		return err == nil && s.Acked == 1 && s.InFlight == 0
	})
	stop()
}

// TestIdleWorkerWaitsOnOneConnection: the two fetchers of a queue of one shard take turns waiting
// in Redis, so an idle worker holds one blocked connection; and work published then is done.
func TestIdleWorkerWaitsOnOneConnection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, calls := watchedQueue[int](t)
	ran := make(chan struct{}, 2)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran <- struct{}{}
		return nil
	}), srq.WorkerConfig{Concurrency: 2, PollWait: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	for range 10 { // ten waits of 20 ms, the fetchers taking turns
		<-calls.blpop
	}
	if n := calls.mostBlpops(); n != 1 {
		t.Fatalf("%d BLPOPs under way at once while idle, want 1", n)
	}
	for i := range 2 {
		if _, err := q.Publish(ctx, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-ran:
		case <-ctx.Done():
			t.Fatal("the published tasks did not run")
		}
	}
}

// failScripts is a go-redis hook that fails, before it is sent, each of the next left calls of
// the scripts it was made for: what a connection reset or a short outage looks like to the worker
// once go-redis has given up its own retries.
type failScripts struct {
	processHookOnly
	shas scriptSet
	mu   sync.Mutex
	left int
	err  error // what the failed calls return; nil: a connection reset
}

func newFailScripts(t *testing.T, left int, scripts ...string) *failScripts {
	t.Helper()
	return &failScripts{shas: scriptSHAs(t, scripts...), left: left}
}

// scriptSet holds the SHA1s (EVALSHA) and the function names (FCALL) under which the engine sends
// some scripts.
type scriptSet map[string]bool

// scriptSHAs returns the set of the named scripts.
func scriptSHAs(t *testing.T, scripts ...string) scriptSet {
	t.Helper()
	shas := scriptSet{}
	for _, name := range scripts {
		src, err := lua.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		shas[lua.SHA1(src)] = true
		shas[lua.Function(engine.LibraryName(), name)] = true
	}
	return shas
}

// runs says whether cmd is a call of one of the scripts, by EVALSHA or by FCALL.
func (s scriptSet) runs(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "evalsha", "fcall", "fcall_ro":
		return s[fmt.Sprint(cmd.Args()[1])]
	}
	return false
}

// processHookOnly gives a go-redis hook that only watches single commands the other two methods
// of redis.Hook, passing dials and pipelines through.
type processHookOnly struct{}

func (processHookOnly) DialHook(next redis.DialHook) redis.DialHook { return next }
func (processHookOnly) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *failScripts) failNext(cmd redis.Cmder) bool {
	if !h.shas.runs(cmd) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.left == 0 {
		return false
	}
	h.left--
	return true
}

// failed reports whether every failure was injected.
func (h *failScripts) failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.left == 0
}

func (h *failScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.failNext(cmd) {
			err := h.err
			if err == nil {
				err = errors.New("injected: connection reset")
			}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestFailedAckIsSentAgain: when the calls that carry a task's ack fail (whether it rides on a
// fetch or goes alone), the worker sends the ack again while the task is still leased to it. The
// task is acked, not run again, and not dead-lettered: before, one failed call left it to its
// lease's expiry, which with one attempt made a dead letter of a task whose handler succeeded.
func TestFailedAckIsSentAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{})
	fails := newFailScripts(t, 3, "ack", "ack_fetch") // whether the acks ride a fetch or go alone
	c.AddHook(fails)
	const id = "acked-at-last"
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: id, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := 0
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Lease: 500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitAckedOrDead(t, q, id)
	stop()
	if ti, err := q.Engine().Task(ctx, id); err == nil {
		t.Fatalf("the task is %s (attempts %d, last error %q), want acked", ti.State, ti.Attempts, ti.LastError)
	}
	if !fails.failed() {
		t.Error("fewer ack calls than the failures to inject")
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 {
		t.Errorf("the handler ran %d times, want 1", runs)
	}
}

// runOrderedPair publishes tasks first and second, in that order, to one ordered partition, each
// with one attempt, on a queue whose client fails as fails says, and runs a worker (Lease 500 ms)
// with handle until both are acked or dead. It returns the queue's stats then and the tasks' ids
// in the order the handler ran them.
func runOrderedPair(t *testing.T, fails *failScripts, first, second string, handle func(id string, run int) error) (engine.Stats, []string) {
	t.Helper()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{})
	c.AddHook(fails)
	var msgs []srq.Message[int]
	for i, id := range []string{first, second} {
		msgs = append(msgs, srq.Message[int]{Value: i, Opts: srq.PublishOpts{ID: id, Partition: "p", Ordered: true, MaxAttempts: 1}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	runs := map[string]int{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(_ context.Context, task *srq.Task[int]) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, task.ID)
		runs[task.ID]++
		return handle(task.ID, runs[task.ID])
	}), srq.WorkerConfig{Lease: 500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "both tasks acked or dead", func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked+st.Dead == 2
	})
	stop()
	st, err := q.Engine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !fails.failed() {
		t.Error("fewer calls than the failures to inject")
	}
	mu.Lock()
	defer mu.Unlock()
	return st, slices.Clone(order)
}

// TestFailedRejectIsSentAgain: when the call that sends back a snoozed task of an ordered
// partition fails, the worker sends it again while it still holds the partition's tasks. Before,
// the task and the later one of its unit, which never ran, were left to their leases' expiry,
// which counted an attempt for each: with one attempt both became dead letters.
func TestFailedRejectIsSentAgain(t *testing.T) {
	t.Parallel()
	st, order := runOrderedPair(t, newFailScripts(t, 2, "reject"), "first", "second", func(id string, run int) error {
		if id == "first" && run == 1 {
			return srq.Snooze(0) // not a failure: no attempt used
		}
		return nil
	})
	if st.Acked != 2 || st.Dead != 0 {
		t.Fatalf("acked %d, dead %d; want both acked", st.Acked, st.Dead)
	}
	if !slices.Equal(order, []string{"first", "first", "second"}) {
		t.Errorf("ran %v, want first twice (snoozed, then done), then second", order)
	}
}

// scriptError is an error reply of Redis, as go-redis returns one: a call that fails this way
// fails again if made again, so the worker does not retry it.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

// TestFailedKillHandsBackTheRest: when the kill of a task of an ordered partition fails, the task
// stays leased until its lease expires, and the later tasks of its unit must not run before it.
// The worker hands them back, so they wait in position behind it without using an attempt; before,
// it only dropped them, and their leases' expiry counted an attempt: with one attempt, a task that
// never ran became a dead letter.
func TestFailedKillHandsBackTheRest(t *testing.T) {
	t.Parallel()
	fails := newFailScripts(t, 1, "kill")
	fails.err = scriptError("ERR injected: the kill cannot run")
	st, order := runOrderedPair(t, fails, "poison", "next", func(id string, _ int) error {
		if id == "poison" {
			return srq.Permanent(errors.New("cannot be done"))
		}
		return nil
	})
	// The poison's lease expired (its one attempt used): dead; the next ran after it.
	if st.Acked != 1 || st.Dead != 1 {
		t.Fatalf("acked %d, dead %d; want the poison dead and the next acked", st.Acked, st.Dead)
	}
	if !slices.Equal(order, []string{"poison", "next"}) {
		t.Errorf("ran %v, want poison, then next", order)
	}
}

// TestLostLeaseHandsTheTaskBack: a handler cut off because its lease's extensions failed (cause
// ErrLeaseLost), whose task no recoverer took back meanwhile, returns its task as at shutdown:
// handed back, no attempt used, so a task of one attempt runs again rather than going to the
// dead letters (worker.md; the middleware reports it handed_back).
func TestLostLeaseHandsTheTaskBack(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[int](t, srq.QueueConfig{})
	c.AddHook(newFailScripts(t, 1_000_000, "extend")) // every extension fails
	const id = "cut-off"
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: id, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []int
	var causes []error
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, t *srq.Task[int]) error {
		mu.Lock()
		attempts = append(attempts, t.Attempt)
		first := len(attempts) == 1
		mu.Unlock()
		if !first {
			return nil
		}
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		return errors.New("cut off")
	}), srq.WorkerConfig{Lease: 300 * time.Millisecond, RecoverInterval: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitAckedOrDead(t, q, id)
	stop()
	st, err := q.Engine().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 1 || !errors.Is(causes[0], srq.ErrLeaseLost) {
		t.Fatalf("the first run's context ended with %v, want ErrLeaseLost", causes)
	}
	if st.DeadLettered != 0 || st.Acked != 1 || st.HandedBack != 1 || !slices.Equal(attempts, []int{1, 1}) {
		t.Errorf("dead-lettered %d, acked %d, handed back %d, attempts %v; want 0, 1, 1 and [1 1]",
			st.DeadLettered, st.Acked, st.HandedBack, attempts)
	}
}

// waitAckedOrDead waits until task id of q is acked (gone) or a dead letter.
func waitAckedOrDead(t *testing.T, q *srq.Queue[int], id string) {
	t.Helper()
	waitFor(t, "the task to be acked or dead", func() bool {
		ti, err := q.Engine().Task(testCtx(t), id)
		return errors.Is(err, srq.ErrNotFound) || err == nil && ti.State == engine.StateDead
	})
}
