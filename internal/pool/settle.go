package pool

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
)

func (p *runner) settleCtx(base context.Context) (context.Context, context.CancelFunc) {
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
func (p *runner) settleCall(base context.Context, call func(context.Context) error) error {
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
		p.cfg.Logger.Warn("settling failed; trying again", "err", err)
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
func (p *runner) mayRetry(first time.Time) bool {
	limit := first.Add(p.cfg.Lease)
	if ns := p.stopAt.Load(); ns != 0 {
		if stop := time.Unix(0, ns).Add(settleTimeout); stop.Before(limit) {
			limit = stop
		}
	}
	return time.Now().Before(limit)
}

// stop notes that every handler has returned: the extender stops next, so held leases are no
// longer extended (mayRetry).
func (p *runner) stop() { p.stopAt.CompareAndSwap(0, time.Now().UnixNano()) }

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

// handBackWaiting hands back the units waiting in units for a handler (Run's, or RunOnce's once
// its context ended), all in one call per shard:
// on a Redis that does not answer, every call waits for its timeout, and shutdown should not wait
// for one per unit.
func (p *runner) handBackWaiting(units chan []*job) {
	p.handBack(waitingIn(units))
}

// waitingIn takes the jobs of every unit waiting in units now, without waiting for more.
func waitingIn(units <-chan []*job) []*job {
	var waiting []*job
	for {
		select {
		case u, ok := <-units:
			if !ok { // RunOnce's channel is closed: empty once ok is false
				return waiting
			}
			waiting = append(waiting, u...)
		default:
			return waiting
		}
	}
}

// release forgets a settled job and frees its slot, unless freeSlot did already.
func (p *runner) release(j *job) {
	j.timer.Stop()
	j.cancel(nil)
	p.mu.Lock()
	delete(p.jobs, j)
	p.mu.Unlock()
	p.freeSlot(j)
}

// freeSlot gives j's slot back once. A job whose handler succeeded gives it back right after
// queueing its ack, so the fetcher can fetch while acks are on their way; the task stays held (its
// lease extended) until the ack. The ack may be done, and the job released, before its handler's
// goroutine gets here: whichever comes first gives the slot back.
func (p *runner) freeSlot(j *job) {
	if j.freed.CompareAndSwap(false, true) {
		if p.pf != nil {
			p.pf.give()
			return
		}
		p.slots <- struct{}{}
	}
}

// handleLoop runs units until units is closed. After Run's context ended it runs no new task: a
// unit it takes then goes back together with every other unit waiting in units, in one call per
// shard, rather than in a call of its own.
func (p *runner) handleLoop(units <-chan []*job) error {
	for u := range units {
		select {
		case <-p.stopping:
			p.handBack(slices.Concat(u, waitingIn(units)))
			continue
		default:
		}
		if u[0].src.Batch != nil {
			p.runBatch(u)
		} else {
			p.runUnit(u)
		}
	}
	return nil
}

// runUnit runs the tasks of one unit in order. When a task of an ordered partition goes back, the
// engine takes back the later tasks of the unit with it; they are released here unrun.
func (p *runner) runUnit(u []*job) {
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
			j.src.log.Info("the lease of a task ran out before it started (the worker stalled, or its extensions failed); handing them back",
				"task", j.d.ID, "tasks", len(u)-i)
			p.handBack(u[i:])
			return
		}
		var err error
		if cause := context.Cause(j.ctx); errors.Is(cause, engine.ErrCancelled) {
			err = cause // cancelled before it started: settled as cancelled, never run
		} else {
			err = p.call(j)
		}
		lost := errors.Is(context.Cause(j.ctx), p.cfg.LeaseLost)
		switch next := p.settle(j, err); {
		case next == handBackRest || next == diedRest || next == runRest && lost:
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
func (p *runner) mayStart(j *job) bool {
	if errors.Is(context.Cause(j.ctx), p.cfg.LeaseLost) {
		return false
	}
	p.mu.Lock()
	cut := j.deadline.Add(-p.startMargin())
	p.mu.Unlock()
	now := time.Now()
	return now.Before(cut) && now.Round(0).Before(cut.Round(0))
}

// startMargin is how much of a task's lease must be left for its handler to start (mayStart): a
// third of the lease, the extender's period.
func (p *runner) startMargin() time.Duration { return p.cfg.Lease / 3 }

// call runs the source's handler over j and keeps the result it returns for the ack.
func (p *runner) call(j *job) error {
	p.inHandler.Add(1)
	defer p.inHandler.Add(-1)
	result, err := j.src.Handle(j.ctx, j.d, j.eng)
	j.result = result
	return err
}

// afterSettle says what becomes of the rest of a unit once one of its tasks is settled.
type afterSettle int

const (
	runRest      afterSettle = iota // the task is done (acked, or dead-lettered): the next one runs
	dropRest                        // the task went back, and the engine took the rest back with it
	handBackRest                    // the task is still there (a kill that did not happen, or whose reply was lost): the rest go back unrun, in position, without using an attempt
	diedRest                        // the task of an ordered partition was dead-lettered: the rest go back as for handBackRest, unless they ran already (a batch) and the dead task does not hold the partition
)

// settle applies the handler's result to j and says what becomes of the rest of its unit.
func (p *runner) settle(j *job, err error) afterSettle {
	if err == nil {
		// Queued before its slot is freed: a fetcher that takes the slot finds the ack (ackQueue).
		p.acks[j.eng].put(j)
		p.freeSlot(j)
		return runRest
	}
	if errors.Is(context.Cause(j.ctx), engine.ErrCancelled) {
		return p.settleCancelled(j)
	}
	v := p.cfg.Classify(err)
	if cause := context.Cause(j.ctx); (errors.Is(cause, p.cfg.Shutdown) || errors.Is(cause, p.cfg.LeaseLost)) && v.Kind != Permanent {
		// Cut off by shutdown, or by its lease's loss (its extensions failed): whatever the
		// handler made of its cancelled context, the task did not fail. It goes back without
		// using an attempt, as the middleware reports it (handed_back); a lease that another
		// worker took meanwhile refuses the hand-back as stale. (middleware.Retry passes a
		// cut-off handler's error through, so it does not turn it into a Permanent here.)
		p.handBack([]*job{j})
		return dropRest
	}
	if v.Panic != nil {
		j.src.log.Error("handler panic", "task", j.d.ID, "panic", v.Panic, "stack", string(v.Stack))
	}
	if v.Kind == Permanent {
		var errs []error
		kerr := p.settleCall(context.WithoutCancel(j.ctx), func(ctx context.Context) (err error) {
			errs, err = j.eng.Kill(ctx, []engine.Failure{{Receipt: j.d.Receipt(), Reason: v.Reason}})
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
	}
	r := p.rejection(j, err, v)
	var res []engine.RejectResult
	rerr := p.settleCall(context.WithoutCancel(j.ctx), func(ctx context.Context) (err error) {
		res, err = j.eng.Reject(ctx, []engine.Rejection{r})
		return err
	})
	p.release(j)
	if rerr != nil {
		j.src.log.Error("reject failed; the task returns when its lease expires", "task", j.d.ID, "err", rerr)
		return dropRest
	}
	if res[0].Err != nil {
		j.src.log.Info("reject refused: the lease was lost", "task", j.d.ID, "err", res[0].Err)
		return dropRest
	}
	if res[0].DeadLettered {
		return p.afterDeath(j)
	}
	return dropRest
}

// rejection is the reject that settles j, whose handler failed with err, read as v (not
// Permanent): a retry after the retry policy's delay, a reject, or a wait.
func (p *runner) rejection(j *job, err error, v Verdict) engine.Rejection {
	r := engine.Rejection{Receipt: j.d.Receipt(), Reason: err.Error()}
	switch v.Kind {
	case Reject:
		r.Delay, r.NotAttempt, r.Reason = v.Delay, v.NotAttempt, v.Reason
	case Wait:
		r.Delay, r.NotAttempt, r.Reason, r.Wait = v.Delay, true, "", v.Wait
	default:
		r.Delay = p.cfg.RetryDelay(j.d.Attempt, err)
	}
	r.Delay = min(max(r.Delay, 0), engine.MaxDelay)
	return r
}

// afterDeath says what becomes of the rest of j's unit once j was dead-lettered. The later tasks
// of an ordered partition go back unrun, in position, without using an attempt (diedRest): a task
// published to hold its partition on death (HoldPartition) has just held it, and they must wait for
// the dead letter; otherwise the partition hands them out again at once. (In a batch they ran
// already: runBatch settles them with their own errors when the partition is not held.)
func (p *runner) afterDeath(j *job) afterSettle {
	if j.d.Partition.IsOrdered() {
		return diedRest
	}
	return runRest
}

// holdsPartition says whether dead task j holds its ordered partition (it was published to hold
// it on death): read from Redis, on the one path that needs it, a death in a batch. When Redis
// cannot say, it says yes, so that the later tasks wait.
func (p *runner) holdsPartition(j *job) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), settleTimeout)
	defer cancel()
	infos, _, err := j.eng.Partitions(ctx, j.d.Partition)
	if err != nil || len(infos) != 1 {
		j.src.log.Warn("could not read whether a dead task holds its partition; the later tasks of its batch go back", "task", j.d.ID, "err", err)
		return true
	}
	return infos[0].HeldBy == j.d.ID
}

// handBack returns tasks that were not run (or were cut off by shutdown) without counting an
// attempt; for an ordered partition the engine keeps their positions. The tasks of one unit share
// a partition, so a shard: one call.
func (p *runner) handBack(js []*job) {
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
				rs[i] = engine.Rejection{Receipt: j.d.Receipt(), HandBack: true}
			}
			err := p.settleCall(base, func(ctx context.Context) error {
				_, err := eng.Reject(ctx, rs)
				return err
			})
			if err != nil {
				p.log(eng).Error("hand back failed; the tasks return when their leases expire", "tasks", len(group), "err", err)
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

func (p *runner) logSettle(op string, j *job, err error, errs []error) {
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	if err != nil {
		j.src.log.Warn(op+" failed", "task", j.d.ID, "err", err)
	}
}

// maxAckBatch is the most acks sent in one call.
// settleCancelled ends j, whose handler was cancelled (cause engine.ErrCancelled) and returned an error
// (settle acks it on nil), as cancelled. The rest of its unit runs next; if the call fails, they
// are handed back, as after a failed kill: the task stays leased, marked, and recovery cancels it
// when its lease expires.
func (p *runner) settleCancelled(j *job) afterSettle {
	var errs []error
	cerr := p.settleCall(context.WithoutCancel(j.ctx), func(ctx context.Context) (err error) {
		errs, err = j.eng.CancelLeased(ctx, []engine.Receipt{j.d.Receipt()}, "cancelled")
		return err
	})
	p.logSettle("cancel", j, cerr, errs)
	p.release(j)
	if cerr != nil || errs[0] != nil {
		return handBackRest
	}
	return runRest
}
