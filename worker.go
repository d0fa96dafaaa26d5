package srq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
)

// WorkerConfig configures a Worker. Zero values mean the documented defaults.
type WorkerConfig struct {
	// Concurrency is how many handlers run at once. Default 10.
	Concurrency int
	// Prefetch is how many tasks may wait leased, fetched ahead of a free handler. Default equal to
	// Concurrency; negative: none. Tasks whose handler succeeded and that wait only for their
	// batched ack count against neither Concurrency nor Prefetch. Concurrency plus Prefetch may be
	// at most engine.MaxFetch. On a queue of one shard, with handlers faster than a round trip, the
	// worker's calls carry about half of Concurrency plus Prefetch each, so a larger Prefetch means
	// fewer, larger calls and more tasks a second (docs/worker.md, "Throughput"); the tasks it holds
	// wait in this worker, and for their leases to expire if its process dies.
	Prefetch int
	// Lease is how long a fetched task stays leased without an extension; the worker extends the
	// leases of its tasks every Lease/3, and starts a task's handler only while more than Lease/3
	// of its lease is left (a task fetched before a stall goes back unrun: docs/guarantees.md).
	// Default 30s; at least 30ms.
	Lease time.Duration
	// ShutdownTimeout is how long Run waits, after its context ends, for running handlers before it
	// cancels their contexts (cause ErrShutdown) and hands their tasks back. Default 30s; negative:
	// cancel them at once. Run returns only when every handler has returned, so a handler that
	// ignores its context holds Run up (its lease is extended meanwhile).
	ShutdownTimeout time.Duration
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Retry decides the delay after a handler's ordinary error. Default DefaultRetryPolicy.
	Retry RetryPolicy
	// Middleware wraps the handler, first outermost.
	Middleware []Middleware
	// ConsumerID names this worker in leases. Default host-pid-random.
	ConsumerID string
	// RecoverInterval is how often the worker returns other consumers' expired leases. Default Lease/2.
	RecoverInterval time.Duration
	// PollWait is how long one blocking fetch waits in Redis for work before it looks again. It also
	// bounds how long Run takes to stop fetching. Default 1s.
	PollWait time.Duration
}

// Worker runs a handler over one queue with a bounded pool of goroutines: fetchers that block in
// Redis while their shard has no work (two on a queue of one shard, which carry the acks along
// with their fetches; one per shard of a sharded queue), Concurrency handlers, a lease extender, a
// recoverer and a batched acker, supervised by an errgroup. The fetchers of a sharded queue share
// the pool's free slots, taking turns, so every shard is served and an idle one holds no slot.
// Tasks of one ordered partition fetched together run one after another in one handler. Make one
// with NewWorker: the zero Worker runs nothing (ErrInvalid).
type Worker struct {
	shards   *shardSet
	queue    string
	codec    codec.Codec // the queue's: results are encoded with it
	work     WorkFunc
	cfg      WorkerConfig
	log      *slog.Logger
	consumer string
	running  atomic.Bool

	mu sync.Mutex
	// jobs holds every fetched task not yet settled. Keyed by the job, not the task id: one id can
	// be held twice, in two shards, or again after its lease was lost while its old handler still runs.
	jobs map[*job]struct{}
}

// NewWorker returns a worker that runs h over q's tasks. It fails with ErrInvalid for a nil or
// zero queue, a nil handler or an invalid configuration.
func NewWorker[T any](q *Queue[T], h Handler[T], cfg WorkerConfig) (*Worker, error) {
	if !q.made() {
		return nil, errNotMade
	}
	if f, ok := h.(HandlerFunc[T]); h == nil || ok && f == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalid)
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 10)
	cfg.Prefetch = cmp.Or(cfg.Prefetch, cfg.Concurrency)
	cfg.Prefetch = max(cfg.Prefetch, 0)
	cfg.Lease = cmp.Or(cfg.Lease, 30*time.Second)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 30*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Retry == nil {
		cfg.Retry = DefaultRetryPolicy
	}
	cfg.ConsumerID = cmp.Or(cfg.ConsumerID, defaultConsumerID())
	cfg.RecoverInterval = cmp.Or(cfg.RecoverInterval, cfg.Lease/2)
	cfg.PollWait = cmp.Or(cfg.PollWait, time.Second)
	switch {
	case cfg.Concurrency < 1:
		return nil, fmt.Errorf("%w: Concurrency %d", ErrInvalid, cfg.Concurrency)
	case cfg.Concurrency > engine.MaxFetch || cfg.Prefetch > engine.MaxFetch-cfg.Concurrency: // no overflow
		// One fetch asks for every free slot: it must stay a fetch the engine accepts.
		return nil, fmt.Errorf("%w: Concurrency %d plus Prefetch %d is over %d (engine.MaxFetch)",
			ErrInvalid, cfg.Concurrency, cfg.Prefetch, engine.MaxFetch)
	case cfg.Lease < 30*time.Millisecond:
		return nil, fmt.Errorf("%w: Lease %v is below 30ms", ErrInvalid, cfg.Lease)
	case cfg.RecoverInterval <= 0 || cfg.PollWait <= 0:
		return nil, fmt.Errorf("%w: negative RecoverInterval or PollWait", ErrInvalid)
	}
	codec := q.codec
	// The handler's panics are recovered here, innermost, so middleware sees them as errors; the
	// pool recovers again around the middleware.
	work := WorkFunc(func(ctx context.Context, d *Delivery) (err error) {
		defer recoverPanic(&err)
		var v T
		if err := codec.Unmarshal(d.Payload, &v); err != nil {
			return Permanent(err)
		}
		return h.Handle(ctx, &Task[T]{Value: v, Delivery: d})
	})
	for i := len(cfg.Middleware) - 1; i >= 0; i-- {
		if cfg.Middleware[i] == nil {
			return nil, fmt.Errorf("%w: Middleware %d is nil", ErrInvalid, i)
		}
		if work = cfg.Middleware[i](work); work == nil {
			return nil, fmt.Errorf("%w: Middleware %d returned a nil WorkFunc", ErrInvalid, i)
		}
	}
	return &Worker{shards: q.shards, queue: q.name, codec: q.codec, work: work, cfg: cfg, consumer: cfg.ConsumerID,
		log: cfg.Logger.With("queue", q.name, "consumer", cfg.ConsumerID), jobs: map[*job]struct{}{}}, nil
}

// made says whether w came from NewWorker; a nil or zero Worker did not, and has no queue to run.
func (w *Worker) made() bool { return w != nil && w.shards != nil }

func defaultConsumerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%04x", cmp.Or(host, "host"), os.Getpid(), rand.Uint32()&0xffff)
}

// Run processes tasks until ctx ends, then shuts down gracefully: it stops fetching, hands back
// fetched tasks no handler started, waits up to ShutdownTimeout for running handlers, cancels the
// rest and hands their tasks back, and flushes its acks. It returns nil after a graceful shutdown,
// once every goroutine it started has ended. Redis errors are logged and retried, not returned. It
// fails at once with ErrRunning if the worker is already running, with an error wrapping
// ErrShardCount when the queue is registered with another shard count, and with one wrapping
// ErrInvalid when the count stored for it is unusable (engine.QueueShards). A nil or zero Worker
// fails with ErrInvalid.
func (w *Worker) Run(ctx context.Context) error {
	if !w.made() {
		return errWorkerNotMade
	}
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	if err := w.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // ctx ended before Redis answered: nothing was started
		}
		return err
	}

	// Handlers and settlement outlive ctx by up to ShutdownTimeout, so they run on a context
	// without ctx's cancellation and end on their own signals.
	base := context.WithoutCancel(ctx)
	handlerCtx, stopHandlers := context.WithCancelCause(base)
	defer stopHandlers(nil)
	loopCtx, stopLoops := context.WithCancel(base)
	defer stopLoops()

	capacity := w.cfg.Concurrency + w.cfg.Prefetch
	slots := make(chan struct{}, capacity)
	for i := 0; i < capacity; i++ {
		slots <- struct{}{}
	}
	units := make(chan []*job, capacity)
	handlersDone := make(chan struct{})
	// One shard gets two fetchers, so one fetch is under way while the other's tasks are handed out
	// (fetchLoop); the fetchers of several shards take turns, one fetching at a time.
	fetchersPerShard := 1
	if len(w.shards.engines) == 1 {
		fetchersPerShard = 2
	}
	p := &pool{w: w, slots: slots, turn: make(chan struct{}, fetchersPerShard), acks: newAckQueues(w.shards.engines), stopping: ctx.Done(), base: base}

	var handlers errgroup.Group
	handlers.Go(func() error {
		// Tasks fetched but not started go back at once when ctx ends, even while every handler
		// is still busy: handlers that find a unit after that hand it back too.
		defer close(units)
		defer p.handBackWaiting(units)
		var fetchers errgroup.Group
		for _, eng := range w.shards.engines {
			shard := &shardFetchers{eng: eng}
			for range fetchersPerShard {
				fetchers.Go(func() error { return p.fetchLoop(ctx, handlerCtx, units, shard) })
			}
		}
		return fetchers.Wait()
	})
	for i := 0; i < w.cfg.Concurrency; i++ {
		handlers.Go(func() error { return p.handleLoop(units) })
	}

	var loops errgroup.Group
	loops.Go(p.ackLoop)
	loops.Go(func() error { return p.extendLoop(loopCtx) })
	loops.Go(func() error { return p.recoverLoop(loopCtx) })
	loops.Go(func() error { return p.relayLoop(loopCtx) })
	loops.Go(func() error { return runSchedules(loopCtx, w.shards, w.log, w.cfg.PollWait) })
	loops.Go(func() error {
		select {
		case <-handlersDone:
			return nil
		case <-ctx.Done():
		}
		t := time.NewTimer(max(w.cfg.ShutdownTimeout, 0))
		defer t.Stop()
		select {
		case <-handlersDone:
		case <-t.C:
			// Handlers that returned may still be settling their tasks (a reject, a hand-back),
			// which takes long only when Redis does: say which of the two holds shutdown up.
			if n := p.inHandler.Load(); n > 0 {
				w.log.Warn("shutdown timeout: cancelling running handlers", "timeout", w.cfg.ShutdownTimeout, "running", n)
			} else {
				w.log.Warn("shutdown timeout: no handler running; waiting for Redis to settle their tasks",
					"timeout", w.cfg.ShutdownTimeout)
			}
			stopHandlers(ErrShutdown)
		}
		return nil
	})

	err := handlers.Wait()
	close(handlersDone)
	p.stop()      // the extender stops next: acks failing from now on are retried only briefly
	p.closeAcks() // every handler has ended: no more acks come
	stopLoops()
	err = errors.Join(err, loops.Wait())
	p.relayLast()
	return err
}

// RunOnce runs the tasks that are ready now, at most Concurrency+Prefetch of them, with up to
// Concurrency handlers at once, settles them and returns how many it fetched (when ctx ends, the
// tasks not yet run are handed back unrun). It does not wait for
// work and runs no recovery; leases are extended while handlers run. It suits tests, and jobs run
// from a scheduler. It fails with ErrRunning if the worker is running, with ErrInvalid for a nil or
// zero Worker, or with the fetch's error.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	if !w.made() {
		return 0, errWorkerNotMade
	}
	if !w.running.CompareAndSwap(false, true) {
		return 0, ErrRunning
	}
	defer w.running.Store(false)

	if err := w.shards.register(ctx); err != nil {
		return 0, err
	}
	capacity := w.cfg.Concurrency + w.cfg.Prefetch
	ds, engs, fetchErr := w.fetchShards(ctx, capacity)
	if fetchErr != nil && len(ds) == 0 {
		return 0, fetchErr
	}
	base := context.WithoutCancel(ctx)
	loopCtx, stopLoops := context.WithCancel(base)
	defer stopLoops()
	// Handlers end when ctx does, with cause ErrShutdown, so their tasks go back unspent.
	handlerCtx, stopHandlers := context.WithCancelCause(base)
	defer stopHandlers(nil)
	stopAfter := context.AfterFunc(ctx, func() { stopHandlers(ErrShutdown) })
	defer stopAfter()
	p := &pool{w: w, slots: make(chan struct{}, capacity), turn: make(chan struct{}, 1), acks: newAckQueues(w.shards.engines),
		stopping: ctx.Done(), base: base}
	units := make(chan []*job, capacity)
	for _, u := range p.group(ds, engs, handlerCtx) {
		units <- u
	}
	close(units)

	var loops errgroup.Group
	loops.Go(p.ackLoop)
	loops.Go(func() error { return p.extendLoop(loopCtx) })
	var handlers errgroup.Group
	for i := 0; i < w.cfg.Concurrency; i++ {
		handlers.Go(func() error { return p.handleLoop(units) })
	}
	// When ctx ends, the units no handler has taken go back in one call per shard, as in Run,
	// rather than one call per unit from the handlers.
	handlersDone := make(chan struct{})
	handBacks := make(chan struct{})
	go func() {
		defer close(handBacks)
		select {
		case <-ctx.Done():
			p.handBackWaiting(units)
		case <-handlersDone:
		}
	}()
	err := handlers.Wait()
	close(handlersDone)
	<-handBacks
	p.stop()
	p.closeAcks()
	stopLoops()
	err = errors.Join(fetchErr, err, loops.Wait())
	p.relayLast()
	return len(ds), err
}

// fetchShards fetches up to n ready tasks from the shards, starting at a random one so that no
// shard is always served first, and returns each task's shard engine with it. With tasks fetched
// already, a later shard's error is returned along with them.
func (w *Worker) fetchShards(ctx context.Context, n int) ([]engine.Delivery, []*engine.Engine, error) {
	var (
		ds   []engine.Delivery
		engs []*engine.Engine
	)
	all := w.shards.engines
	start := rand.IntN(len(all))
	for k := range all {
		if len(ds) >= n {
			break
		}
		eng := all[(start+k)%len(all)]
		got, err := eng.Fetch(ctx, w.consumer, n-len(ds), w.cfg.Lease)
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

// register records the queue's shard count, retrying while Redis is unreachable, until ctx ends.
// It fails with an error wrapping ErrShardCount, or ctx's error.
func (w *Worker) register(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		err := w.shards.register(ctx)
		if err == nil || errors.Is(err, ErrShardCount) || errors.Is(err, ErrInvalid) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		w.log.Error("register queue failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}
