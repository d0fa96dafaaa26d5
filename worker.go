package srq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/pool"
)

// WorkerConfig configures a Worker. Zero values mean the documented defaults.
type WorkerConfig struct {
	// Concurrency is how many handlers run at once; a batch handler (NewBatchWorker,
	// ServeBatches) running one batch counts once. Default 10.
	Concurrency int
	// Prefetch is how many tasks may wait leased, fetched ahead of a free handler. Default
	// (0): adaptive, from Concurrency up to 8 × Concurrency (at least 64), sized to what the
	// handlers finish in a few fetch round trips, so fast handlers get few, large calls and slow
	// ones keep a prefetch of Concurrency; a positive Prefetch is fixed; negative: none. Tasks whose
	// handler succeeded and that wait only for their batched ack count against neither
	// Concurrency nor Prefetch. Concurrency plus Prefetch may be at most engine.MaxFetch: the
	// adaptive default grows only that far, and starts at Concurrency, so with it Concurrency may be
	// at most engine.MaxFetch / 2 (NewWorker's error then names that Prefetch). On a
	// queue of one shard, with handlers faster than a round trip, the worker's calls carry about
	// half of Concurrency plus the prefetch each, so a larger prefetch means fewer, larger calls
	// and more tasks a second (docs/worker.md, "Throughput"); the tasks it holds wait in this
	// worker, and for their leases to expire if its process dies. A worker with batch queues
	// holds tasks gathered into batches against the same Concurrency + Prefetch, and its default
	// Prefetch is fixed at Concurrency × the largest BatchConfig.MaxSize (BatchConfig).
	Prefetch int
	// Lease is how long a fetched task stays leased without an extension; the worker extends the
	// leases of its tasks every Lease/3, and starts a task's handler only while more than Lease/3
	// of its lease is left (a task fetched before a stall goes back unrun: docs/guarantees.md).
	// Default 30s; at least 30ms.
	Lease time.Duration
	// ShutdownTimeout is how long Run waits, after its context ends, for running handlers before it
	// cancels their contexts (cause ErrShutdown). A handler cancelled so that then returns an error
	// has its task handed back without an attempt used, whatever the error, except a Permanent
	// one, which dead-letters the task as usual; one that then returns nil has its task acked.
	// Default 30s; negative: cancel them at once. Run returns only when every handler has
	// returned, so a handler that ignores its context holds Run up (its lease is extended
	// meanwhile).
	ShutdownTimeout time.Duration
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Retry decides the delay after a handler's ordinary error. Default DefaultRetryPolicy.
	Retry RetryPolicy
	// Middleware wraps the handler, first outermost.
	Middleware []Middleware
	// ConsumerID names this worker in leases. Default host-pid-random.
	ConsumerID string
	// RecoverInterval is the longest the worker takes to return an expired lease of any consumer,
	// and to relay flow messages other processes left; on a single node or Sentinel it looks for
	// them every PollWait when that is shorter, with one call over all its queues. Default Lease/2.
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
// Tasks of one ordered partition fetched together run one after another in one handler. A worker
// of several queues (NewWorkerOf) has two fetchers that give the turns to the queues by weight, and
// waits for its idle queues in one blocking call. Make one with NewWorker or NewWorkerOf: the zero
// Worker runs nothing (ErrInvalid).
type Worker struct {
	queues  []*shardSet // the queues it serves, each registered before it runs
	pool    *pool.Pool
	log     *slog.Logger
	running atomic.Bool
	// decodeLogged has a flag per queue, set once a payload of the queue that cannot be decoded
	// was logged; Run and RunOnce clear them, so each run logs the first of each queue.
	decodeLogged []*atomic.Bool
	card         *card // the record it keeps of itself while it runs (worker_card.go)
}

// NewWorker returns a worker that runs h over q's tasks. It fails with ErrInvalid for a nil or
// zero queue, a nil handler or an invalid configuration.
func NewWorker[T any](q *Queue[T], h Handler[T], cfg WorkerConfig) (*Worker, error) {
	if !q.made() {
		return nil, errNotMade
	}
	if nilHandler(h) {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logged := new(atomic.Bool)
	src, err := source(q, h, cfg, logged)
	if err != nil {
		return nil, err
	}
	w := &Worker{queues: []*shardSet{q.shards}, log: cfg.Logger.With("consumer", cfg.ConsumerID),
		decodeLogged: []*atomic.Bool{logged}}
	w.card = newCard(cfg, w.queues, w.log)
	src.Handle = w.card.counting(src.Handle)
	w.pool = pool.New(poolConfig(cfg, src.Logger), []pool.Source{src})
	return w, nil
}

// nilHandler says whether h is nil, or a nil HandlerFunc.
func nilHandler[T any](h Handler[T]) bool {
	f, ok := h.(HandlerFunc[T])
	return h == nil || ok && f == nil
}

// prefetchRange is the prefetch a worker of cfg starts at and the most it grows to: for the
// default (Prefetch 0), Concurrency up to 8 × Concurrency (at least 64) within engine.MaxFetch;
// else Prefetch, fixed (0 when negative).
func (cfg WorkerConfig) prefetchRange() (lo, hi int) {
	if cfg.Prefetch != 0 {
		p := max(cfg.Prefetch, 0)
		return p, p
	}
	return cfg.Concurrency, max(cfg.Concurrency, min(max(8*cfg.Concurrency, 64), engine.MaxFetch-cfg.Concurrency))
}

// withDefaults returns cfg with its defaults set; Prefetch stays as given, for prefetchRange. It
// fails with ErrInvalid for an invalid configuration.
func (cfg WorkerConfig) withDefaults() (WorkerConfig, error) {
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 10)
	cfg.Lease = cmp.Or(cfg.Lease, 30*time.Second)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, 30*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Retry == nil {
		cfg.Retry = DefaultRetryPolicy
	}
	cfg.ConsumerID = cmp.Or(cfg.ConsumerID, defaultConsumerID())
	cfg.RecoverInterval = cmp.Or(cfg.RecoverInterval, cfg.Lease/2)
	cfg.PollWait = cmp.Or(cfg.PollWait, time.Second)
	prefetch, _ := cfg.prefetchRange()
	switch {
	case cfg.Concurrency < 1:
		return cfg, fmt.Errorf("%w: Concurrency %d", ErrInvalid, cfg.Concurrency)
	case cfg.Concurrency > engine.MaxFetch || prefetch > engine.MaxFetch-cfg.Concurrency: // no overflow
		// One fetch asks for every free slot: it must stay a fetch the engine accepts.
		return cfg, fmt.Errorf("%w: Concurrency %d plus Prefetch %d is over %d (engine.MaxFetch)",
			ErrInvalid, cfg.Concurrency, prefetch, engine.MaxFetch)
	case cfg.Lease < 30*time.Millisecond:
		return cfg, fmt.Errorf("%w: Lease %v is below 30ms", ErrInvalid, cfg.Lease)
	case cfg.RecoverInterval <= 0 || cfg.PollWait <= 0:
		return cfg, fmt.Errorf("%w: negative RecoverInterval or PollWait", ErrInvalid)
	}
	return cfg, nil
}

// source returns the pool's view of q served by h: its shards, and a handler over an engine
// delivery that decodes the payload and runs h inside cfg's middleware. The first payload it
// cannot decode while logged is false is logged, at Error, and sets logged. It fails with
// ErrInvalid for a nil middleware, or one that returns a nil WorkFunc.
func source[T any](q *Queue[T], h Handler[T], cfg WorkerConfig, logged *atomic.Bool) (pool.Source, error) {
	codec := q.codec
	log := cfg.Logger.With("queue", q.name, "consumer", cfg.ConsumerID)
	// The handler's panics are recovered here, innermost, so middleware sees them as errors; they
	// are recovered again around the middleware.
	work := WorkFunc(func(ctx context.Context, d *Delivery) (err error) {
		defer recoverPanic(&err)
		var v T
		if err := codec.Unmarshal(d.Payload, &v); err != nil {
			// Every such task of a queue usually has one cause (a producer on another codec, or
			// another payload type): said once per run, not once per task.
			if logged.CompareAndSwap(false, true) {
				log.Error("cannot decode a task's payload: it goes to the dead letters; is a producer using another codec or payload type? (later ones of this queue are not logged until the worker runs again)",
					"codec", codec.Name(), "task", d.ID, "err", err)
			}
			return Permanent(err)
		}
		return h.Handle(ctx, &Task[T]{Value: v, Delivery: d})
	})
	for i := len(cfg.Middleware) - 1; i >= 0; i-- {
		if cfg.Middleware[i] == nil {
			return pool.Source{}, fmt.Errorf("%w: Middleware %d is nil", ErrInvalid, i)
		}
		if work = cfg.Middleware[i](work); work == nil {
			return pool.Source{}, fmt.Errorf("%w: Middleware %d returned a nil WorkFunc", ErrInvalid, i)
		}
	}
	name := q.name
	handle := func(ctx context.Context, ed *engine.Delivery, eng *engine.Engine) (result []byte, err error) {
		d := &Delivery{Delivery: *ed, Queue: name, codec: codec, maxResult: eng.Config().MaxResultBytes, eng: eng}
		defer recoverPanic(&err)
		err = work(ctx, d)
		var wait *WaitError
		if errors.As(err, &wait) && d.stateSet {
			// The state the handler set rides with its wait; a copy, as the caller's error may be
			// shared.
			w := *wait
			w.state = d.state
			err = &w
		}
		return d.result, err
	}
	return pool.Source{Name: name, Engines: q.shards.engines, Handle: handle, Logger: log}, nil
}

// poolConfig returns the pool's configuration for cfg, whose defaults are set; log receives the
// logs that concern no one queue.
func poolConfig(cfg WorkerConfig, log *slog.Logger) pool.Config {
	prefetch, prefetchMax := cfg.prefetchRange()
	return pool.Config{
		Concurrency: cfg.Concurrency, Prefetch: prefetch, PrefetchMax: prefetchMax, Lease: cfg.Lease, ShutdownTimeout: cfg.ShutdownTimeout,
		RecoverInterval: cfg.RecoverInterval, PollWait: cfg.PollWait, Consumer: cfg.ConsumerID, Logger: log,
		Classify: classify, RetryDelay: cfg.Retry, LeaseLost: ErrLeaseLost, Shutdown: ErrShutdown,
	}
}

// classify reads a handler's error for the pool: Permanent, Reject (RejectWithDelay, Snooze…) or
// an ordinary failure to retry, and a panic's value and stack to log.
func classify(err error) pool.Verdict {
	var (
		v    pool.Verdict
		rej  *RejectError
		perm *PermanentError
		wait *WaitError
		pan  *PanicError
	)
	if errors.As(err, &pan) {
		v.Panic, v.Stack = pan.Value, pan.Stack
	}
	switch {
	case errors.As(err, &perm):
		// The dead letter keeps the handler's reason, as PermanentError says, not the wrapper's
		// words: Permanent(errors.New("permanent failure")) would read twice so.
		v.Kind, v.Reason = pool.Permanent, "permanent failure"
		if perm.Err != nil {
			v.Reason = perm.Err.Error()
		}
	case errors.As(err, &wait):
		v.Kind, v.Delay = pool.Wait, wait.timeout
		v.Wait = &engine.Wait{Kind: wait.kind, Signal: wait.signal, State: wait.state}
	case errors.As(err, &rej):
		// The reason kept is the handler's own error; a plain snooze is no failure, so the
		// last error stays as it was.
		v.Kind, v.Delay, v.NotAttempt = pool.Reject, rej.Delay, rej.NotAttempt
		if rej.Err != nil {
			v.Reason = rej.Err.Error()
		}
	default:
		v.Kind = pool.Retry
	}
	return v
}

// recoverPanic, deferred, turns a panic into a *PanicError with the stack, stored in *err.
func recoverPanic(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// made says whether w came from NewWorker; a nil or zero Worker did not, and has no queue to run.
func (w *Worker) made() bool { return w != nil && len(w.queues) > 0 }

func defaultConsumerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%04x", cmp.Or(host, "host"), os.Getpid(), rand.Uint32()&0xffff)
}

// Run processes tasks until ctx ends, then shuts down gracefully: it logs at Info that it shuts
// down (with how many handlers run and ShutdownTimeout), stops fetching, hands back fetched tasks
// no handler started, waits up to ShutdownTimeout for running handlers, cancels the rest (cause
// ErrShutdown) and hands their tasks back (except that a cancelled handler that then returns nil
// has its task acked, and one that returns a Permanent error has it dead-lettered), flushes its
// acks, and leaves the queues' consumers lists (one call per shard, at most 2s), so inspect no
// longer shows it live. Tasks handed back use no attempt and count in
// Stats.HandedBack. It returns nil after a graceful shutdown, once every goroutine it started has
// ended. Redis errors are logged and retried, not returned. It
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
	w.newRun()
	if err := w.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // ctx ended before Redis answered: nothing was started
		}
		return err
	}

	stopCard := w.card.start(ctx)
	defer stopCard()
	return w.pool.Run(ctx)
}

// RunOnce runs the tasks that are ready now, at most Concurrency+Prefetch of them (the adaptive
// default Prefetch counts as Concurrency, where it starts: at most 2 × Concurrency), with up to
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
	w.newRun()

	for _, q := range w.queues {
		if err := q.register(ctx); err != nil {
			return 0, err
		}
	}
	return w.pool.RunOnce(ctx)
}

// newRun clears what a run of the worker logs once (a payload that cannot be decoded, per queue).
func (w *Worker) newRun() {
	for _, l := range w.decodeLogged {
		l.Store(false)
	}
}

// register records the shard count of each of the worker's queues, retrying while Redis is
// unreachable, until ctx ends. It fails with an error wrapping ErrShardCount or ErrInvalid, or
// ctx's error.
func (w *Worker) register(ctx context.Context) error {
	for _, q := range w.queues {
		if err := w.registerQueue(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// registerQueue records q's shard count, retrying while Redis is unreachable, until ctx ends.
func (w *Worker) registerQueue(ctx context.Context, q *shardSet) error {
	backoff := time.Duration(0)
	for {
		err := q.register(ctx)
		if err == nil || errors.Is(err, ErrShardCount) || errors.Is(err, ErrInvalid) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
		w.log.Error("register queue failed; retrying", "queue", q.name, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}
