package srq

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// settleTimeout bounds each Redis call that settles tasks, which run on a context that outlives
// Run's so shutdown can still hand tasks back.
const settleTimeout = 10 * time.Second

// job is one fetched task until it is settled: its handler context, which ends when the lease is
// lost, and the timer that ends it at the lease deadline unless the extender moves it.
type job struct {
	d      *Delivery
	eng    *engine.Engine // the engine of the task's shard
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	// deadline is when the lease ends as far as this worker knows, on this machine's clock: the
	// time the call that last set it (the fetch, then each extension) was sent, plus the lease.
	// Redis's deadline is never earlier. Guarded by the worker's mu.
	deadline time.Time
	freed    atomic.Bool // its slot went back: when its handler succeeded, or on release (freeSlot)
}

// pool is one Run's machinery: the loops share the worker and these channels.
type pool struct {
	w         *Worker
	slots     chan struct{}                // one per task the worker may hold, fetched or running
	turn      chan struct{}                // a token per fetch that may be taking slots and fetching at once (1, or 2 on one shard)
	acks      map[*engine.Engine]*ackQueue // per shard: jobs to ack, sent along with a fetch or batched by ackLoop
	stopping  <-chan struct{}              // closed when Run's context ends
	base      context.Context              // outlives Run's context: acks and hand-backs still go out at shutdown
	stopAt    atomic.Int64                 // unix ns when every handler had returned (stop); 0 before
	inHandler atomic.Int32                 // handlers running now (call), not counting their settling calls
}

func (p *pool) settleCtx(base context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(base, settleTimeout)
}

// settleCall runs call, a Redis call that settles held tasks (an ack, a reject, a kill, a
// hand-back), each time with its own settleTimeout, and when it fails in a way that may pass
// (transient: a connection reset, a failover, a timeout) runs it again after a pause
// (retryPauseMin, doubling up to retryPauseMax) while mayRetry allows. The tasks stay held meanwhile, their leases extended while
// the worker runs, so a call that lands later is as good; one given up on leaves them to their
// leases' expiry, which counts an attempt (unless QueueConfig.CrashIsNotAttempt) even for the tasks
// of an ordered unit that never ran. A call that did land although its reply was lost is refused
// the second time (the lease is gone), which callers must allow for. It returns the last error.
func (p *pool) settleCall(base context.Context, call func(context.Context) error) error {
	var first time.Time
	var pause time.Duration
	for {
		ctx, cancel := p.settleCtx(base)
		err := call(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if first.IsZero() {
			first = time.Now()
		}
		if !transient(err) || !p.mayRetry(first) {
			return err
		}
		p.w.log.Warn("settling failed; trying again", "err", err)
		pause = min(max(2*pause, retryPauseMin), retryPauseMax)
		time.Sleep(pause)
	}
}

// The pauses between the tries of a failing settling call (settleCall).
const (
	retryPauseMin = 50 * time.Millisecond
	retryPauseMax = time.Second
)

// mayRetry says whether a call that settles held tasks and first failed at first may be tried
// again. The bound follows the leases: while any handler may still run, the extender extends the
// held tasks' leases, so for a Lease after the first failure (also after Run's context ended, for
// the hand-backs and the handlers finishing within ShutdownTimeout); once every handler has
// returned (stop), the extender stops, and retries end settleTimeout after that. So a Redis that
// does not answer holds up Run's return by up to about a Lease, beyond ShutdownTimeout when the
// Lease is longer, and settleTimeout and a call or two after the handlers.
func (p *pool) mayRetry(first time.Time) bool {
	limit := first.Add(p.w.cfg.Lease)
	if ns := p.stopAt.Load(); ns != 0 {
		if stop := time.Unix(0, ns).Add(settleTimeout); stop.Before(limit) {
			limit = stop
		}
	}
	return time.Now().Before(limit)
}

// stop notes that every handler has returned: the extender stops next, so held leases are no
// longer extended (mayRetry).
func (p *pool) stop() { p.stopAt.CompareAndSwap(0, time.Now().UnixNano()) }

// transient says whether err, a failed call, may pass if the call is made again: a network error
// or timeout, or a Redis error that a failover or a restart answers with; not a script error or
// a refused argument, which the same call would meet again.
func transient(err error) bool {
	if errors.Is(err, engine.ErrInvalid) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Redis before 7 reports an error of a command inside a script within its own
		// ("ERR Error running script … -READONLY …"), hence the "-" form too.
		msg := rerr.Error()
		for _, code := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "OOM",
			"NOREPLICAS", "MOVED", "ASK"} {
			if strings.HasPrefix(msg, code+" ") || strings.Contains(msg, "-"+code+" ") {
				return true
			}
		}
		// A server at its maxclients refuses a new connection with a plain ERR; it passes as
		// clients leave.
		return strings.Contains(msg, "max number of clients reached")
	}
	return true
}

// fetchLoop fetches from one shard's engine as many tasks as there are free slots, groups them
// into units (the tasks of one ordered partition together, every other task alone) and hands the
// units to the handlers. While the shard has no work it blocks in Redis holding no slot, so the
// fetchers of other shards can use them. The fetchers of a sharded queue take turns (FIFO): one at
// a time takes every free slot and fetches, so each fetch gets as big a batch as a single shard's
// would, instead of the free slots being split between the shards' fetchers. A queue of one shard
// has two fetchers with a turn each, so one can fetch while the other's call is under way; that
// second fetch first waits until it holds half of all slots, or the other returns (fetchFree).
// While tasks finish faster than a round trip (a worker Redis keeps busy) the two calls overlap
// and Redis is not left idle between a reply and the next call; with slower handlers they mostly
// follow each other, each larger. On a queue of one shard the fetcher also carries the queued acks
// (ackQueue). It ends when ctx ends.
func (p *pool) fetchLoop(ctx, handlerCtx context.Context, units chan []*job, shard *shardFetchers) error {
	w := p.w
	eng := shard.eng
	// This fetcher takes the queued acks along with its fetches while it fetches, and leaves them
	// to the acker while it waits or backs off.
	rides := p.acksRide()
	riding := false
	ride := func(on bool) {
		if rides && riding != on {
			riding = on
			p.acks[eng].ride(on)
		}
	}
	defer ride(false)
	for {
		// After a failed fetch the shard is probed: one slot, taken outside the turns. A node that
		// does not answer holds a call up to the client's timeouts (and go-redis's retries), and a
		// fetch of it holding the turn and every free slot would stall the other shards' fetches as
		// long: it does so at most once, for the call that found it failing.
		probe := shard.probing()
		ride(true)
		if !probe {
			select {
			case <-ctx.Done():
				return nil
			case p.turn <- struct{}{}:
			}
		}
		select {
		case <-ctx.Done():
			if !probe {
				<-p.turn
			}
			return nil
		case <-p.slots:
		}
		ds, nextDue, err := p.fetchFree(ctx, shard, probe)
		if !probe {
			<-p.turn
		}
		if err == nil && len(ds) == 0 {
			ride(false)
			wait := w.cfg.PollWait
			if nextDue >= 0 {
				wait = max(min(wait, nextDue), time.Millisecond)
			}
			var woken bool
			woken, err = shard.wait(ctx, wait)
			if woken && len(p.slots) == 0 {
				// Every slot is busy (with other shards' work): hand the wake-up on, so an idle
				// worker takes this shard's work now rather than at the end of its own wait. (A
				// slot freed meanwhile only means two fetches for the work; one finds nothing.)
				if err := eng.Wake(ctx); err != nil && ctx.Err() == nil {
					w.log.Warn("handing on a wake-up failed", "err", err)
				}
			}
		}
		if err != nil {
			ride(false)
			if ctx.Err() != nil {
				return nil
			}
			backoff := shard.failed()
			w.log.Error("fetch failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		shard.succeeded()
		if len(ds) == 0 {
			continue
		}
		engs := make([]*engine.Engine, len(ds))
		for i := range engs {
			engs[i] = eng
		}
		for _, u := range p.group(ds, engs, handlerCtx) {
			units <- u // never blocks: units has room for every slot
		}
	}
}

// fetchFree fetches for the free slots: it holds one already, takes every other free one, and
// gives back those the fetch found no task for. A fetch that begins while the shard's other
// fetcher's is under way first waits until it holds half of all slots, or the other returns (and
// then takes what is free), or ctx ends: both calls in flight stay large, rather than this one
// taking what is free at once. A probe fetches for the one slot it holds.
func (p *pool) fetchFree(ctx context.Context, shard *shardFetchers, probe bool) ([]engine.Delivery, time.Duration, error) {
	n := 1
	other := shard.begin()
	if !probe {
		n += p.grabSlots(cap(p.slots) - 1)
		if other != nil {
			n = p.waitSlots(ctx, other, n)
		}
	}
	ds, nextDue, err := p.fetch(ctx, shard.eng, n)
	for i := len(ds); i < n; i++ {
		p.slots <- struct{}{}
	}
	// After the slots went back: a fetch waiting for this one to end finds them.
	shard.end()
	return ds, nextDue, err
}

// waitSlots, holding n slots while another fetch of the shard is under way, takes more until it
// holds half of all slots, or the other fetch returns (then it takes every slot free), or ctx
// ends. It returns how many slots it holds.
func (p *pool) waitSlots(ctx context.Context, other <-chan struct{}, n int) int {
	for n < cap(p.slots)/2 {
		select {
		case <-p.slots:
			n++
		case <-other:
			return n + p.grabSlots(cap(p.slots)-n)
		case <-ctx.Done():
			return n // the fetch fails with ctx's error and gives the slots back
		}
	}
	return n
}

// grabSlots takes up to max of the slots free now, without waiting, and returns how many.
func (p *pool) grabSlots(max int) int {
	for n := 0; n < max; n++ {
		select {
		case <-p.slots:
		default:
			return n
		}
	}
	return max
}

// acksRide says whether the fetchers take the queued acks along with their fetches: on a queue of
// one shard. With several, the fetchers of the shards take turns, so a shard's acks would wait
// for its fetcher's turn: each shard's acker sends them, so a slow node never holds up a fetch.
func (p *pool) acksRide() bool { return len(p.w.shards.engines) == 1 }

// fetch leases up to n tasks from eng, taking the queued acks along in the same call when acks
// ride (AckFetch, one round trip and one script instead of two).
func (p *pool) fetch(ctx context.Context, eng *engine.Engine, n int) ([]engine.Delivery, time.Duration, error) {
	w := p.w
	var mine []*job
	if p.acksRide() {
		mine = p.acks[eng].take()
	}
	if len(mine) == 0 {
		return eng.FetchNext(ctx, w.consumer, n, w.cfg.Lease)
	}
	errs, ds, nextDue, err := eng.AckFetch(ctx, receipts(mine), w.consumer, n, w.cfg.Lease)
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// Run's context ended before the call went out: the acks must still be sent.
		p.ack(eng, mine)
		return nil, 0, err
	case err != nil && transient(err):
		// The tasks are still held: the acker sends their acks again, with its pauses (ack).
		p.acks[eng].retry(mine)
	default:
		p.acked(mine, errs, err)
	}
	return ds, nextDue, err
}

// group makes units of ds, whose shard engines engs gives, one for one.
func (p *pool) group(ds []engine.Delivery, engs []*engine.Engine, handlerCtx context.Context) [][]*job {
	var units [][]*job
	ordered := map[partition.Key]int{}
	for i := range ds {
		j := p.newJob(&ds[i], engs[i], handlerCtx)
		if key := ds[i].Partition; key.IsOrdered() {
			if k, ok := ordered[key]; ok {
				units[k] = append(units[k], j)
				continue
			}
			ordered[key] = len(units)
		}
		units = append(units, []*job{j})
	}
	return units
}

func (p *pool) newJob(d *engine.Delivery, eng *engine.Engine, handlerCtx context.Context) *job {
	ctx, cancel := context.WithCancelCause(handlerCtx)
	j := &job{d: &Delivery{Delivery: *d, Queue: p.w.queue, codec: p.w.codec, maxResult: eng.Config().MaxResultBytes, eng: eng},
		eng: eng, ctx: ctx, cancel: cancel, deadline: d.LeaseDeadline}
	j.timer = time.AfterFunc(time.Until(d.LeaseDeadline), func() { cancel(ErrLeaseLost) })
	p.w.mu.Lock()
	p.w.jobs[j] = struct{}{}
	p.w.mu.Unlock()
	return j
}

// handBackWaiting hands back the units waiting in units for a handler (Run's, or RunOnce's once
// its context ended), all in one call per shard:
// on a Redis that does not answer, every call waits for its timeout, and shutdown should not wait
// for one per unit.
func (p *pool) handBackWaiting(units chan []*job) {
	var waiting []*job
	for drained := false; !drained; {
		select {
		case u, ok := <-units:
			waiting = append(waiting, u...)
			drained = !ok // RunOnce's channel is closed: empty once ok is false
		default:
			drained = true
		}
	}
	p.handBack(waiting)
}

// release forgets a settled job and frees its slot, unless freeSlot did already.
func (p *pool) release(j *job) {
	j.timer.Stop()
	j.cancel(nil)
	p.w.mu.Lock()
	delete(p.w.jobs, j)
	p.w.mu.Unlock()
	p.freeSlot(j)
}

// freeSlot gives j's slot back once. A job whose handler succeeded gives it back right after
// queueing its ack, so the fetcher can fetch while acks are on their way; the task stays held (its
// lease extended) until the ack. The ack may be done, and the job released, before its handler's
// goroutine gets here: whichever comes first gives the slot back.
func (p *pool) freeSlot(j *job) {
	if j.freed.CompareAndSwap(false, true) {
		p.slots <- struct{}{}
	}
}

// handleLoop runs units until units is closed. After Run's context ended it runs no new task:
// it hands them back.
func (p *pool) handleLoop(units <-chan []*job) error {
	for u := range units {
		p.runUnit(u)
	}
	return nil
}

// runUnit runs the tasks of one unit in order. When a task of an ordered partition goes back, the
// engine takes back the later tasks of the unit with it; they are released here unrun.
func (p *pool) runUnit(u []*job) {
	for i, j := range u {
		select {
		case <-p.stopping:
			p.handBack(u[i:])
			return
		default:
		}
		if !p.mayStart(j) {
			// The tasks of a unit were leased and are extended together: when one's lease is lost
			// or about to end, so are the others' (recovery takes an ordered partition's leased
			// tasks together, and another consumer may run them now, so this one must not). They
			// are handed back, not just dropped: the deadline this worker knows is a lower bound of
			// Redis's (an extension may have landed whose reply came late; a lease past its
			// deadline stays this worker's until a recoverer takes it), and where the leases are
			// still this worker's, the hand-back returns the tasks at once, in position, without
			// using an attempt, where dropped ones would wait for their leases to expire, holding
			// their ordered partition meanwhile, and then use an attempt. Where the leases are gone
			// the hand-back is refused as stale and changes nothing: one round trip.
			p.w.log.Info("the lease of a task ran out before it started (the worker stalled, or its extensions failed); handing them back",
				"task", j.d.ID, "tasks", len(u)-i)
			p.handBack(u[i:])
			return
		}
		var err error
		if cause := context.Cause(j.ctx); errors.Is(cause, ErrCancelled) {
			err = cause // cancelled before it started: settled as cancelled, never run
		} else {
			err = p.call(j)
		}
		lost := errors.Is(context.Cause(j.ctx), ErrLeaseLost)
		switch next := p.settle(j, err); {
		case next == handBackRest || next == runRest && lost:
			p.handBack(u[i+1:])
			return
		case next != runRest:
			for _, later := range u[i+1:] {
				p.release(later)
			}
			return
		}
	}
}

// mayStart says whether j's handler may start: its lease was not refused, and more than a third of
// the lease (startMargin) is left before the deadline the worker knows. That deadline comes from
// the fetch or the last extension, on this machine's clock (job.deadline), and Redis's is never
// earlier, so the lease is still valid in Redis when the handler starts; the margin covers the
// moments from this check to the handler's first steps and a difference in the rates of the two
// machines' clocks (Redis's deadlines are on its clock), and leaves the handler a lease the
// extender can extend. A healthy worker never comes near it: the extender extends every lease
// every Lease/3, so at least two thirds of a lease are left, less the extension's round trip.
// What does reach it is a worker that stalled (SIGSTOP, a long GC or scheduling pause, a suspended
// machine) or whose extensions fail: its timers end the tasks' contexts at their deadlines, but
// after a stall a handler may take a task before that timer has run.
//
// Both of this machine's clocks are checked: the monotonic one, which runs on while the process is
// stopped and is immune to clock steps, and the wall clock, which also runs on while the machine is
// suspended, when the monotonic clock stands still (Linux). A forward step of the wall clock by
// more than two thirds of a lease may thus hand back tasks that could have run: they go back
// without using an attempt.
func (p *pool) mayStart(j *job) bool {
	if errors.Is(context.Cause(j.ctx), ErrLeaseLost) {
		return false
	}
	p.w.mu.Lock()
	cut := j.deadline.Add(-p.startMargin())
	p.w.mu.Unlock()
	now := time.Now()
	return now.Before(cut) && now.Round(0).Before(cut.Round(0))
}

// startMargin is how much of a task's lease must be left for its handler to start (mayStart): a
// third of the lease, the extender's period.
func (p *pool) startMargin() time.Duration { return p.w.cfg.Lease / 3 }

// call runs the middleware-wrapped handler, turning a panic in middleware into a *PanicError.
func (p *pool) call(j *job) (err error) {
	p.inHandler.Add(1)
	defer p.inHandler.Add(-1)
	defer recoverPanic(&err)
	return p.w.work(j.ctx, j.d)
}

// recoverPanic, deferred, turns a panic into a *PanicError with the stack, stored in *err.
func recoverPanic(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// afterSettle says what becomes of the rest of a unit once one of its tasks is settled.
type afterSettle int

const (
	runRest      afterSettle = iota // the task is done (acked, or dead-lettered): the next one runs
	dropRest                        // the task went back, and the engine took the rest back with it
	handBackRest                    // the task is still there (a kill that did not happen, or whose reply was lost): the rest go back unrun, in position, without using an attempt
)

// settle applies the handler's result to j and says what becomes of the rest of its unit.
func (p *pool) settle(j *job, err error) afterSettle {
	w := p.w
	if err == nil {
		// Queued before its slot is freed: a fetcher that takes the slot finds the ack (ackQueue).
		p.acks[j.eng].put(j)
		p.freeSlot(j)
		return runRest
	}
	var (
		rej  *RejectError
		perm *PermanentError
		pan  *PanicError
	)
	if errors.Is(context.Cause(j.ctx), ErrCancelled) {
		return p.settleCancelled(j)
	}
	if errors.Is(context.Cause(j.ctx), ErrShutdown) && !errors.As(err, &perm) {
		// Cut off by shutdown: whatever the handler made of its cancelled context, the task did
		// not fail. It goes back without using an attempt. (middleware.Retry passes a cut-off
		// handler's error through, so it does not turn it into a Permanent here.)
		p.handBack([]*job{j})
		return dropRest
	}
	if errors.As(err, &pan) {
		w.log.Error("handler panic", "task", j.d.ID, "panic", pan.Value, "stack", string(pan.Stack))
	}
	r := engine.Rejection{Receipt: j.d.Receipt(), Reason: err.Error()}
	switch {
	case errors.As(err, &perm):
		// The dead letter keeps the handler's reason, as PermanentError says, not the wrapper's
		// words: Permanent(errors.New("permanent failure")) would read twice so.
		r.Reason = "permanent failure"
		if perm.Err != nil {
			r.Reason = perm.Err.Error()
		}
		var errs []error
		kerr := p.settleCall(context.WithoutCancel(j.ctx), func(ctx context.Context) (err error) {
			errs, err = j.eng.Kill(ctx, []engine.Failure{{Receipt: r.Receipt, Reason: r.Reason}})
			return err
		})
		p.logSettle("kill", j, kerr, errs)
		p.release(j)
		if kerr != nil || errs[0] != nil {
			// A kill that did not happen leaves the task to come back when its lease expires: the
			// later tasks of its ordered partition must not run before it. Handed back, they wait
			// behind it (its partition stays held by its lease) without using an attempt; and if the
			// kill did land and only its reply was lost, they run next.
			return handBackRest
		}
		return p.afterDeath(j)
	case errors.As(err, &rej):
		// The reason kept is the handler's own error; a plain snooze is no failure, so the
		// last error stays as it was.
		r.Delay, r.NotAttempt, r.Reason = rej.Delay, rej.NotAttempt, ""
		if rej.Err != nil {
			r.Reason = rej.Err.Error()
		}
	default:
		r.Delay = w.cfg.Retry(j.d.Attempt, err)
	}
	r.Delay = min(max(r.Delay, 0), engine.MaxDelay)
	var res []engine.RejectResult
	rerr := p.settleCall(context.WithoutCancel(j.ctx), func(ctx context.Context) (err error) {
		res, err = j.eng.Reject(ctx, []engine.Rejection{r})
		return err
	})
	p.release(j)
	if rerr != nil {
		w.log.Error("reject failed; the task returns when its lease expires", "task", j.d.ID, "err", rerr)
		return dropRest
	}
	if res[0].Err != nil {
		w.log.Info("reject refused: the lease was lost", "task", j.d.ID, "err", res[0].Err)
		return dropRest
	}
	if res[0].DeadLettered {
		return p.afterDeath(j)
	}
	return dropRest
}

// afterDeath says what becomes of the rest of j's unit once j was dead-lettered. The later tasks
// of an ordered partition go back unrun, in position, without using an attempt: a task published
// to hold its partition on death (HoldPartition) has just held it, and they must wait for the dead
// letter; otherwise the partition hands them out again at once.
func (p *pool) afterDeath(j *job) afterSettle {
	if j.d.Partition.IsOrdered() {
		return handBackRest
	}
	return runRest
}

// handBack returns tasks that were not run (or were cut off by shutdown) without counting an
// attempt; for an ordered partition the engine keeps their positions. The tasks of one unit share
// a partition, so a shard: one call.
func (p *pool) handBack(js []*job) {
	if len(js) == 0 {
		return
	}
	base := context.WithoutCancel(js[0].ctx)
	// The shards at once, as the acker sends its acks: a shard that does not answer holds up the
	// others' hand-backs (and shutdown) no longer than its own.
	var wg sync.WaitGroup
	for eng, group := range byShard(js) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := make([]engine.Rejection, len(group))
			for i, j := range group {
				// No reason: the task did not fail, so its last error stays as it was.
				rs[i] = engine.Rejection{Receipt: j.d.Receipt(), NotAttempt: true}
			}
			err := p.settleCall(base, func(ctx context.Context) error {
				_, err := eng.Reject(ctx, rs)
				return err
			})
			if err != nil {
				p.w.log.Error("hand back failed; the tasks return when their leases expire", "tasks", len(group), "err", err)
			}
		}()
	}
	wg.Wait()
	for _, j := range js {
		p.release(j)
	}
}

// byShard groups jobs by the engine of their shard, keeping their order within each group.
func byShard(js []*job) map[*engine.Engine][]*job {
	m := make(map[*engine.Engine][]*job, 1)
	for _, j := range js {
		m[j.eng] = append(m[j.eng], j)
	}
	return m
}

func (p *pool) logSettle(op string, j *job, err error, errs []error) {
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		p.w.log.Warn(op+" failed", "task", j.d.ID, "err", err)
	}
}

// maxAckBatch is the most acks sent in one call.
const maxAckBatch = 256

// newAckQueues returns an ack queue for each shard.
func newAckQueues(engines []*engine.Engine) map[*engine.Engine]*ackQueue {
	m := make(map[*engine.Engine]*ackQueue, len(engines))
	for _, eng := range engines {
		m[eng] = newAckQueue()
	}
	return m
}

// closeAcks closes every shard's ack queue: every handler has ended, no more acks come.
func (p *pool) closeAcks() {
	for _, q := range p.acks {
		q.close()
	}
}

// ackLoop acks the jobs no fetch takes along, whatever is queued (up to maxAckBatch) in one call,
// with an acker for each shard: the shards live on different nodes of a cluster, and a node that
// does not answer, whose acks are sent again for up to a Lease, must not hold up the others' acks
// (nor so the ordered partitions those acks release). They end when their queues are closed and
// drained.
func (p *pool) ackLoop() error {
	return p.perShard(func(eng *engine.Engine) {
		for {
			batch, ok := p.acks[eng].next(maxAckBatch)
			if !ok {
				return
			}
			p.ack(eng, batch)
		}
	})
}

// ack acks jobs of one shard in one call, sent again while it fails in a way that may pass
// (settleCall: the tasks are still held and their leases extended, so an ack that lands later is
// as good), and releases them. An ack given up on means the task runs again after its lease
// expires, and with QueueConfig.CrashIsNotAttempt false that uses an attempt, dead-lettering a
// task on its last one though its handler succeeded. An ack that landed although its reply was
// lost is refused the second time, which is harmless.
func (p *pool) ack(eng *engine.Engine, js []*job) {
	var errs []error
	err := p.settleCall(p.base, func(ctx context.Context) (err error) {
		errs, err = eng.Ack(ctx, receipts(js))
		return err
	})
	p.acked(js, errs, err)
}

// receipts returns the receipts of js.
func receipts(js []*job) []engine.Receipt {
	rs := make([]engine.Receipt, len(js))
	for i, j := range js {
		rs[i] = j.d.ackReceipt()
	}
	return rs
}

// acked logs what an ack of js answered (errs, one per job, or err for the call) and releases them.
func (p *pool) acked(js []*job, errs []error, err error) {
	if err != nil {
		p.w.log.Error("ack failed; the tasks return when their leases expire", "tasks", len(js), "err", err)
	}
	for i, j := range js {
		if err == nil && errs[i] != nil {
			p.w.log.Info("ack refused: the lease was lost", "task", j.d.ID, "err", errs[i])
		}
		p.release(j)
	}
}

// extendLoop extends the leases of every held task every Lease/3, one call per shard, each shard
// on a loop of its own. A task whose lease is refused has its context cancelled with ErrLeaseLost;
// one whose lease cannot be extended in time (Redis unreachable) is cancelled by its timer at the
// deadline. A loop per shard, because a node that does not answer holds its call up to the
// client's timeouts, which may be longer than what is left of the other shards' leases; each
// loop's ticker keeps one tick while its call runs, so a slow call is followed by the next at once.
func (p *pool) extendLoop(ctx context.Context) error {
	return p.perShard(func(eng *engine.Engine) { p.extendShard(ctx, eng) })
}

// perShard runs loop for every shard, each on a goroutine of its own, until all have returned.
func (p *pool) perShard(loop func(*engine.Engine)) error {
	var wg sync.WaitGroup
	for _, eng := range p.w.shards.engines {
		wg.Go(func() { loop(eng) })
	}
	wg.Wait()
	return nil
}

// extendShard extends the leases of the tasks of eng's shard every Lease/3 until ctx ends.
func (p *pool) extendShard(ctx context.Context, eng *engine.Engine) {
	w := p.w
	t := time.NewTicker(w.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var js []*job
		w.mu.Lock()
		for j := range w.jobs {
			if j.eng == eng {
				js = append(js, j)
			}
		}
		w.mu.Unlock()
		if len(js) > 0 {
			p.extend(ctx, eng, js)
		}
	}
}

// extend extends the leases of jobs of one shard, in chunks of 500.
func (p *pool) extend(ctx context.Context, eng *engine.Engine, js []*job) {
	w := p.w
	for len(js) > 0 {
		chunk := js[:min(len(js), 500)]
		js = js[len(chunk):]
		rs := make([]engine.Receipt, len(chunk))
		for i, j := range chunk {
			rs[i] = j.d.Receipt()
		}
		errs, deadline, err := eng.Extend(ctx, rs, w.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Error("lease extension failed", "tasks", len(rs), "err", err)
			}
			continue
		}
		w.mu.Lock()
		for i, j := range chunk {
			if _, ok := w.jobs[j]; !ok {
				continue // settled since the snapshot
			}
			if errors.Is(errs[i], ErrCancelled) {
				j.cancel(ErrCancelled) // the lease was extended: the handler winds down in time
			} else if errs[i] != nil {
				j.cancel(fmt.Errorf("%w: %w", ErrLeaseLost, errs[i]))
				continue
			}
			j.deadline = deadline
			j.timer.Reset(time.Until(deadline))
		}
		w.mu.Unlock()
	}
}

// recoverLoop returns expired leases, of any consumer, every RecoverInterval, each shard on a loop
// of its own, as extendLoop does: a node that does not answer must not hold up the others'
// recovery.
func (p *pool) recoverLoop(ctx context.Context) error {
	return p.perShard(func(eng *engine.Engine) { p.recoverShard(ctx, eng) })
}

// recoverShard returns the expired leases of eng's shard at once and then every RecoverInterval
// until ctx ends.
func (p *pool) recoverShard(ctx context.Context, eng *engine.Engine) {
	w := p.w
	t := time.NewTicker(w.cfg.RecoverInterval)
	defer t.Stop()
	for {
		r, err := eng.RecoverAll(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("recovery failed", "queue", eng.Config().Queue, "err", err)
		} else if r.Returned+r.DeadLettered > 0 {
			w.log.Info("recovered expired leases", "queue", eng.Config().Queue,
				"returned", r.Returned, "dead_lettered", r.DeadLettered)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
