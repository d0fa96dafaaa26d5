// Package pool is the worker runtime: fetch, handle, settle, ack, extend and recover loops over
// engine.Engine shards. It knows nothing of payload types, codecs or middleware: the srq package
// hands it the shard engines of each queue a worker serves (a Source), a handler over an
// engine.Delivery, and how to read a handler's error (Config.Classify), and it runs the bounded
// pool of goroutines that serves them. It is internal: srq.Worker is its only user and its API.
package pool

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/engine"
)

// Config is what a Pool takes from the srq package: the worker's settings, already defaulted and
// checked (New does not check them again), and the few decisions that belong to the product API.
type Config struct {
	// Concurrency is how many handlers run at once; at least 1.
	Concurrency int
	// Prefetch is how many tasks may wait leased, fetched ahead of a free handler; at least 0.
	// Concurrency plus Prefetch is at most engine.MaxFetch.
	Prefetch int
	// PrefetchMax, when above Prefetch, makes the prefetch adaptive: it grows from Prefetch up to
	// PrefetchMax while the handlers are fast (prefetcher). Concurrency plus PrefetchMax is at most
	// engine.MaxFetch.
	PrefetchMax int
	// Lease is how long a fetched task stays leased without an extension.
	Lease time.Duration
	// ShutdownTimeout is how long Run waits, after its context ends, for running handlers before
	// it cancels their contexts with cause Shutdown; negative: at once.
	ShutdownTimeout time.Duration
	// RecoverInterval bounds how long after their expiry expired leases are returned, and how
	// long a flow outbox that no call of this worker wrote to waits for its relay.
	RecoverInterval time.Duration
	// PollWait bounds one blocking wait in Redis, and how long a schedule created or changed
	// meanwhile waits to be seen (upkeep.go).
	PollWait time.Duration
	// Consumer names the worker in leases.
	Consumer string
	// Logger receives the logs that concern no one queue (the shutdown timeout).
	Logger *slog.Logger
	// Classify says what a handler's non-nil error asks for (retry, permanent, reject).
	Classify func(err error) Verdict
	// RetryDelay gives the delay before a task whose handler failed with an ordinary error (Verdict
	// Retry) runs again; attempt is the attempt that failed.
	RetryDelay func(attempt int, err error) time.Duration
	// LeaseLost is the cause of a handler's context ending because its lease was lost.
	LeaseLost error
	// Shutdown is the cause of a handler's context ending because the worker stopped waiting.
	Shutdown error
}

// Kind is what a handler's error asks for.
type Kind int

const (
	// Retry: an ordinary failure; the task goes back after Config.RetryDelay, an attempt used.
	Retry Kind = iota
	// Permanent: the task goes to the dead letters now, with Verdict.Reason.
	Permanent
	// Reject: the task goes back after Verdict.Delay (an ordered partition keeps its order).
	Reject
	// Wait: the task waits, as Verdict.Wait says, for at most Verdict.Delay when it is not 0;
	// no attempt is used.
	Wait
)

// Verdict is Config.Classify's reading of a handler's error.
type Verdict struct {
	Kind Kind
	// Delay is a Reject's delay.
	Delay time.Duration
	// NotAttempt says a Reject does not use an attempt.
	NotAttempt bool
	// Reason is the error kept with the task; for a Reject, "" keeps the task's last error as it was.
	Reason string
	// Wait is what a Wait waits for.
	Wait *engine.Wait
	// Panic, when not nil, is the value a handler panicked with (logged with Stack).
	Panic any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// HandleFunc runs a handler over one delivery of eng's shard and returns the result to store
// with the ack (nil for none) and the handler's error. It must not panic: the srq package turns a
// handler's panic into an error before it gets here.
type HandleFunc func(ctx context.Context, d *engine.Delivery, eng *engine.Engine) (result []byte, err error)

// Source is one queue a Pool serves: its shard engines and its handler.
type Source struct {
	// Name is the queue's name, for logs.
	Name string
	// Engines are the queue's shards, one engine each; at least one.
	Engines []*engine.Engine
	// Handle runs the queue's handler; unused when Batch is set.
	Handle HandleFunc
	// Batch, when not nil, runs the queue's tasks in batches, with Batch.Handle (batch.go).
	Batch *Batch
	// Logger receives the logs about the queue's tasks and shards.
	Logger *slog.Logger
	// Weight is the queue's share of the fetches of a pool over several queues, against the
	// others' weights; below 1 counts as 1.
	Weight int
}

// Pool runs handlers over the tasks of its sources with one bounded pool of goroutines: the
// sources share its slots and handlers. Make one with New; a Pool runs one Run or RunOnce at a time (the srq.Worker guards that).
type Pool struct {
	cfg     Config
	sources []*source
}

// source is a Source as a Run holds it.
type source struct {
	Source
	log *slog.Logger
}

// New returns a pool over srcs with cfg. It does not check cfg or srcs: the srq package does, and
// reports what is wrong in its own errors.
func New(cfg Config, srcs []Source) *Pool {
	p := &Pool{cfg: cfg}
	for _, s := range srcs {
		p.sources = append(p.sources, &source{Source: s, log: s.Logger})
	}
	return p
}

// settleTimeout bounds each Redis call that settles tasks, which run on a context that outlives
// Run's so shutdown can still hand tasks back.
const settleTimeout = 10 * time.Second

// leaveTimeout bounds the calls that take a stopped worker out of its shards' consumers lists
// (leave): a Redis that does not answer them holds Run's return up no longer.
const leaveTimeout = 2 * time.Second

// job is one fetched task until it is settled: its handler context, which ends when the lease is
// lost, and the timer that ends it at the lease deadline unless the extender moves it.
type job struct {
	d      *engine.Delivery
	src    *source
	eng    *engine.Engine // the engine of the task's shard
	result []byte         // what the handler returned to store with the ack
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	// deadline is when the lease ends as far as this worker knows, on this machine's clock: the
	// time the call that last set it (the fetch, then each extension) was sent, plus the lease.
	// Redis's deadline is never earlier. Guarded by the runner's mu.
	deadline time.Time
	freed    atomic.Bool // its slot went back: when its handler succeeded, or on release (freeSlot)
}

// ackReceipt is the receipt j is acked with: its id, token and result.
func (j *job) ackReceipt() engine.Receipt {
	r := j.d.Receipt()
	r.Result = j.result
	return r
}

// runner is one Run's (or RunOnce's) machinery: the loops share it.
type runner struct {
	cfg       *Config
	sources   []*source
	engines   []*engine.Engine             // every shard of every source
	srcOf     map[*engine.Engine]*source   // the source of each shard
	multi     bool                         // the fetchers are runMulti's, over several sources
	slots     chan struct{}                // one per task the worker may hold, fetched or running
	turn      chan struct{}                // a token per fetch that may be taking slots and fetching at once (1, or 2 on one shard)
	acks      map[*engine.Engine]*ackQueue // per shard: jobs to ack, sent along with a fetch or batched by ackLoop
	stopping  <-chan struct{}              // closed when Run's context ends
	base      context.Context              // outlives Run's context: acks and hand-backs still go out at shutdown
	stopAt    atomic.Int64                 // unix ns when every handler had returned (stop); 0 before
	inHandler atomic.Int32                 // handlers running now (call), not counting their settling calls
	pf        *prefetcher                  // sizes an adaptive prefetch; nil for a fixed one
	// collectors gathers the batches of each batch source (batch.go); set before the fetchers start.
	collectors map[*source]*collector
	gathered   atomic.Int64 // the tasks the collectors hold

	mu sync.Mutex
	// jobs holds every fetched task not yet settled. Keyed by the job, not the task id: one id can
	// be held twice, in two shards, or again after its lease was lost while its old handler still runs.
	jobs map[*job]struct{}
}

// newRunner returns the machinery of one Run of p, with capacity slots (empty) and turns turns.
func (p *Pool) newRunner(capacity, turns int, stopping <-chan struct{}, base context.Context) *runner {
	r := &runner{cfg: &p.cfg, sources: p.sources, srcOf: map[*engine.Engine]*source{},
		slots: make(chan struct{}, capacity), turn: make(chan struct{}, turns),
		acks: map[*engine.Engine]*ackQueue{}, stopping: stopping, base: base, jobs: map[*job]struct{}{}}
	for _, s := range p.sources {
		for _, eng := range s.Engines {
			r.engines = append(r.engines, eng)
			r.srcOf[eng] = s
			r.acks[eng] = newAckQueue()
		}
	}
	return r
}

// Run processes tasks until ctx ends, then shuts down gracefully: it logs that it does, stops
// fetching, hands back fetched tasks no handler started, waits up to ShutdownTimeout for running
// handlers, cancels the rest (cause Config.Shutdown) and hands their tasks back, flushes its acks,
// and takes the consumer out of its shards' consumers lists (leave). Redis errors are
// logged and retried, not returned: it returns nil once every goroutine it started has ended. One
// source is fetched by fetchLoop (two fetchers on one shard, one per shard of several); several
// sources by runMulti, which shares the fetches between them by weight.
func (p *Pool) Run(ctx context.Context) error {
	// Handlers and settlement outlive ctx by up to ShutdownTimeout, so they run on a context
	// without ctx's cancellation and end on their own signals.
	base := context.WithoutCancel(ctx)
	handlerCtx, stopHandlers := context.WithCancelCause(base)
	defer stopHandlers(nil)
	loopCtx, stopLoops := context.WithCancel(base)
	defer stopLoops()

	capacity := p.cfg.Concurrency + max(p.cfg.Prefetch, p.cfg.PrefetchMax)
	// One shard gets two fetchers, so one fetch is under way while the other's tasks are handed out
	// (fetchLoop); the fetchers of several shards take turns, one fetching at a time.
	fetchersPerShard := 1
	if p.shardCount() == 1 {
		fetchersPerShard = 2
	}
	r := p.newRunner(capacity, fetchersPerShard, ctx.Done(), base)
	if p.cfg.PrefetchMax > p.cfg.Prefetch {
		// The slots of the prefetch it has not grown to yet stay out of circulation.
		r.pf = newPrefetcher(p.cfg.Prefetch, p.cfg.PrefetchMax, r.slots)
		capacity -= p.cfg.PrefetchMax - p.cfg.Prefetch
	}
	for i := 0; i < capacity; i++ {
		r.slots <- struct{}{}
	}
	units := make(chan []*job, capacity)
	r.newCollectors(units)
	handlersDone := make(chan struct{})

	var handlers errgroup.Group
	handlers.Go(func() error {
		// Tasks fetched but not started go back at once when ctx ends, even while every handler
		// is still busy: handlers that find a unit after that hand it back too.
		defer close(units)
		defer r.handBackWaiting(units)
		// First of all, the batches being gathered go back: no handler started them.
		defer r.closeCollectors()
		if len(p.sources) > 1 {
			r.runMulti(ctx, handlerCtx, units)
			return nil
		}
		var fetchers errgroup.Group
		for _, eng := range r.engines {
			shard := &shardFetchers{eng: eng}
			for range fetchersPerShard {
				fetchers.Go(func() error { return r.fetchLoop(ctx, handlerCtx, units, shard) })
			}
		}
		return fetchers.Wait()
	})
	for i := 0; i < p.cfg.Concurrency; i++ {
		handlers.Go(func() error { return r.handleLoop(units) })
	}

	var loops errgroup.Group
	loops.Go(r.ackLoop)
	loops.Go(func() error { return r.extendLoop(loopCtx) })
	if r.probes() {
		loops.Go(func() error { return r.upkeepLoop(loopCtx) })
	} else {
		loops.Go(func() error { return r.recoverLoop(loopCtx) })
		loops.Go(func() error { return r.relayLoop(loopCtx) })
		for _, s := range p.sources {
			loops.Go(func() error { return runSchedules(loopCtx, s, p.cfg.PollWait) })
		}
	}
	loops.Go(func() error {
		select {
		case <-handlersDone:
			return nil
		case <-ctx.Done():
		}
		// Said once, at Info: an operator sees that the stop was taken, and for how long at most the
		// running handlers hold it up before they are cancelled.
		p.cfg.Logger.Info("shutting down: fetching stopped; waiting for running handlers",
			"running", r.inHandler.Load(), "timeout", max(p.cfg.ShutdownTimeout, 0))
		t := time.NewTimer(max(p.cfg.ShutdownTimeout, 0))
		defer t.Stop()
		select {
		case <-handlersDone:
		case <-t.C:
			// Handlers that returned may still be settling their tasks (a reject, a hand-back),
			// which takes long only when Redis does: say which of the two holds shutdown up.
			if n := r.inHandler.Load(); n > 0 {
				p.cfg.Logger.Warn("shutdown timeout: cancelling running handlers", "timeout", max(p.cfg.ShutdownTimeout, 0), "running", n)
			} else {
				p.cfg.Logger.Warn("shutdown timeout: no handler running; waiting for Redis to settle their tasks",
					"timeout", max(p.cfg.ShutdownTimeout, 0))
			}
			stopHandlers(p.cfg.Shutdown)
		}
		return nil
	})

	err := handlers.Wait()
	close(handlersDone)
	r.stop()      // the extender stops next: acks failing from now on are retried only briefly
	r.closeAcks() // every handler has ended: no more acks come
	stopLoops()
	err = errors.Join(err, loops.Wait())
	r.relayLast()
	r.leave()
	return err
}

// leave takes the worker out of the consumers list of every shard it served, once it has stopped
// calling Redis: one call per shard, at once, all within leaveTimeout. A call that fails leaves
// the worker listed until it ages out (engine.ConsumerLive), as before it left; it is logged.
func (p *runner) leave() {
	ctx, cancel := context.WithTimeout(p.base, leaveTimeout)
	defer cancel()
	_ = p.perShard(func(eng *engine.Engine) {
		if err := eng.Leave(ctx, p.cfg.Consumer); err != nil {
			p.log(eng).Warn("leaving the consumers list failed; the worker shows as live until its last heartbeat is 30s old", "err", err)
		}
	})
}

// shardCount is the number of shards of every source together.
func (p *Pool) shardCount() int {
	n := 0
	for _, s := range p.sources {
		n += len(s.Engines)
	}
	return n
}

// RunOnce runs the tasks that are ready now, at most Concurrency+Prefetch of them, with up to
// Concurrency handlers at once, settles them and returns how many it fetched (when ctx ends, the
// tasks not yet run are handed back unrun). It does not wait for work and runs no recovery; leases
// are extended while handlers run. It fails with the fetch's error (returned along with the tasks
// run when some were fetched before it).
func (p *Pool) RunOnce(ctx context.Context) (int, error) {
	capacity := p.cfg.Concurrency + p.cfg.Prefetch
	base := context.WithoutCancel(ctx)
	loopCtx, stopLoops := context.WithCancel(base)
	defer stopLoops()
	// Handlers end when ctx does, with cause Shutdown, so their tasks go back unspent.
	handlerCtx, stopHandlers := context.WithCancelCause(base)
	defer stopHandlers(nil)
	stopAfter := context.AfterFunc(ctx, func() { stopHandlers(p.cfg.Shutdown) })
	defer stopAfter()
	r := p.newRunner(capacity, 1, ctx.Done(), base)
	ds, engs, fetchErr := r.fetchShards(ctx, capacity)
	if fetchErr != nil && len(ds) == 0 {
		return 0, fetchErr
	}
	units := make(chan []*job, capacity)
	r.newCollectors(units)
	for _, u := range r.group(ds, engs, handlerCtx) {
		r.dispatch(u, units)
	}
	for _, c := range r.collectors {
		c.flushAll() // nothing more comes: every batch runs now
	}
	close(units)

	var loops errgroup.Group
	loops.Go(r.ackLoop)
	loops.Go(func() error { return r.extendLoop(loopCtx) })
	var handlers errgroup.Group
	for i := 0; i < p.cfg.Concurrency; i++ {
		handlers.Go(func() error { return r.handleLoop(units) })
	}
	// When ctx ends, the units no handler has taken go back in one call per shard, as in Run,
	// rather than one call per unit from the handlers.
	handlersDone := make(chan struct{})
	handBacks := make(chan struct{})
	go func() {
		defer close(handBacks)
		select {
		case <-ctx.Done():
			r.handBackWaiting(units)
		case <-handlersDone:
		}
	}()
	err := handlers.Wait()
	close(handlersDone)
	<-handBacks
	r.stop()
	r.closeAcks()
	stopLoops()
	err = errors.Join(fetchErr, err, loops.Wait())
	r.relayLast()
	return len(ds), err
}

// fetchShards fetches up to n ready tasks from the shards, starting at a random one so that no
// shard is always served first, and returns each task's shard engine with it. With tasks fetched
// already, a later shard's error is returned along with them.
func (p *runner) fetchShards(ctx context.Context, n int) ([]engine.Delivery, []*engine.Engine, error) {
	var (
		ds   []engine.Delivery
		engs []*engine.Engine
	)
	all := p.engines
	start := rand.IntN(len(all))
	for k := range all {
		if len(ds) >= n {
			break
		}
		eng := all[(start+k)%len(all)]
		got, err := eng.Fetch(ctx, p.cfg.Consumer, n-len(ds), p.cfg.Lease)
		if err != nil {
			return ds, engs, err
		}
		ds = append(ds, got...)
		for range got {
			engs = append(engs, eng)
		}
	}
	return ds, engs, nil
}

// log returns the logger of eng's source.
func (p *runner) log(eng *engine.Engine) *slog.Logger { return p.srcOf[eng].log }
