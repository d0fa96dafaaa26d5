package srq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/pool"
)

// BatchHandler processes up to BatchConfig.MaxSize tasks of a queue in one call. Its error
// decides what happens to each task:
//   - nil: every task is acked;
//   - an error built by BatchErrors (a *BatchError, also wrapped): each task gets its own error,
//     read as a Handler's error is (nil acks it; Reject, RejectWithDelay, Snooze, Permanent, or an
//     ordinary error under the retry policy);
//   - any other error: every task of the batch gets it, as a Handler's.
//
// The tasks are in the order they were fetched; those of an ordered partition are in the
// partition's order and are settled in it: when one goes back (a reject, a retry), the later ones
// of its partition in the batch go back with it, whatever their own errors, and run again after
// it. A task is delivered at least once: handlers must be idempotent. The context ends when the
// lease of any task of the batch is lost (cause ErrLeaseLost) or the worker stops waiting for it
// (cause ErrShutdown).
type BatchHandler[T any] interface {
	HandleBatch(ctx context.Context, tasks []*Task[T]) error
}

// BatchHandlerFunc adapts a function to a BatchHandler.
type BatchHandlerFunc[T any] func(ctx context.Context, tasks []*Task[T]) error

// HandleBatch calls f.
func (f BatchHandlerFunc[T]) HandleBatch(ctx context.Context, tasks []*Task[T]) error {
	return f(ctx, tasks)
}

// BatchConfig configures how a worker gathers a queue's tasks into batches (NewBatchWorker,
// ServeBatches). Zero values mean the documented defaults.
type BatchConfig struct {
	// MaxSize is the most tasks one HandleBatch call gets. Default 100. It must fit in what the
	// worker holds, Concurrency + Prefetch tasks: with the default Prefetch a worker with batch
	// queues has a fixed prefetch of Concurrency × the largest MaxSize (at most engine.MaxFetch
	// tasks in all), so every handler can run a full batch while the next ones gather.
	MaxSize int
	// MaxWait is the longest the first task of a batch waits for others: a batch runs when it has
	// MaxSize tasks, or MaxWait after its first task was fetched. Default 1s.
	MaxWait time.Duration
	// Group, when not nil, puts each task in a group by its envelope (not its payload, which is
	// decoded later): a batch holds tasks of one group only. ByPartition groups by partition,
	// ByHeader by a header the publisher sets. Nil: one group. An ordered partition's tasks
	// fetched together whose groups differ are cut at the first change: the later ones go back
	// unrun, in their places and without using an attempt, and come again after the first part.
	// The Delivery it gets has no result: SetResult fails on it. A Group that panics is logged, and
	// puts the task in a group of the tasks whose Group panicked.
	Group func(d *Delivery) string
}

// ByPartition is a BatchConfig.Group that groups tasks by partition: a batch holds the tasks of
// one partition.
func ByPartition(d *Delivery) string { return string(d.Partition) }

// ByHeader returns a BatchConfig.Group that groups tasks by the value of the header name
// (PublishOpts.Headers): a batch holds tasks with one value; tasks without the header form a group
// of their own.
func ByHeader(name string) func(d *Delivery) string {
	return func(d *Delivery) string {
		v, ok := d.Headers[name]
		if !ok {
			return "\x00none"
		}
		return "=" + v
	}
}

// BatchError is a BatchHandler's error that gives each task of the batch its own error, one for
// one: Errs[i] is tasks[i]'s, nil to ack it. Build it with BatchErrors. A BatchError whose Errs
// are not as many as the tasks gives every task an error wrapping ErrInvalid instead (retried
// under the retry policy).
type BatchError struct {
	Errs []error
}

// BatchErrors returns a *BatchError with a copy of errs: errs[i] decides what becomes of the
// handler's tasks[i], as a Handler's error would; nil acks it. It does not fail; a length that
// is not the batch's is reported to the tasks (BatchError).
func BatchErrors(errs []error) error { return &BatchError{Errs: slices.Clone(errs)} }

// Error says how many tasks of the batch failed, and the first failure.
func (e *BatchError) Error() string {
	n, first := 0, error(nil)
	for _, err := range e.Errs {
		if err != nil {
			if n++; first == nil {
				first = err
			}
		}
	}
	if first == nil {
		return fmt.Sprintf("srq: batch of %d tasks: none failed", len(e.Errs))
	}
	return fmt.Sprintf("srq: %d of %d tasks of the batch failed, first: %v", n, len(e.Errs), first)
}

// Unwrap returns the tasks' errors that are not nil, for errors.Is and errors.As.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// withDefaults returns bc with its defaults set. It fails with ErrInvalid for a MaxSize or
// MaxWait below 0.
func (bc BatchConfig) withDefaults() (BatchConfig, error) {
	switch {
	case bc.MaxSize < 0:
		return bc, fmt.Errorf("%w: BatchConfig.MaxSize %d is below 1", ErrInvalid, bc.MaxSize)
	case bc.MaxWait < 0:
		return bc, fmt.Errorf("%w: BatchConfig.MaxWait %v is negative", ErrInvalid, bc.MaxWait)
	}
	bc.MaxSize = cmp.Or(bc.MaxSize, 100)
	bc.MaxWait = cmp.Or(bc.MaxWait, time.Second)
	return bc, nil
}

// NewBatchWorker returns a worker that runs h over q's tasks in batches, as bc says. Concurrency
// is how many batches run at once; the worker holds up to Concurrency + Prefetch tasks, running
// or gathered into batches, and besides them the tasks that wait for their ack
// (BatchConfig.MaxSize says what Prefetch 0 means then). Everything else
// works as for NewWorker; cfg's middleware wraps each task of a batch (see docs/batches.md). It
// fails with ErrInvalid for a nil or zero queue, a nil handler, a bad BatchConfig (MaxSize or
// MaxWait negative, MaxSize over what the worker holds), or an invalid configuration.
func NewBatchWorker[T any](q *Queue[T], h BatchHandler[T], bc BatchConfig, cfg WorkerConfig) (*Worker, error) {
	s := ServeBatches(q, h, bc, nil)
	if s.err != nil {
		return nil, s.err
	}
	cfg, err := batchDefaults(cfg, s)
	if err != nil {
		return nil, err
	}
	logged := new(atomic.Bool)
	src, err := s.source(cfg, logged)
	if err != nil {
		return nil, err
	}
	w := &Worker{queues: []*shardSet{q.shards}, log: cfg.Logger.With("consumer", cfg.ConsumerID),
		decodeLogged: []*atomic.Bool{logged}}
	w.card = newCard(cfg, w.queues, w.log)
	src.Batch.Handle = w.card.countingBatch(src.Batch.Handle)
	w.pool = pool.New(poolConfig(cfg, src.Logger), []pool.Source{src})
	return w, nil
}

// ServeBatches pairs q with the batch handler h, with bc and opts (nil for the defaults), for
// NewWorkerOf: the worker runs q's tasks in batches beside its other queues' tasks. It does not
// fail: what is wrong (a nil or zero queue, a nil handler, a bad BatchConfig) is reported by
// NewWorkerOf.
func ServeBatches[T any](q *Queue[T], h BatchHandler[T], bc BatchConfig, opts *ServeOpts) Served {
	if opts == nil {
		opts = &ServeOpts{}
	}
	if !q.made() {
		return Served{err: errNotMade}
	}
	f, isFunc := h.(BatchHandlerFunc[T])
	if h == nil || isFunc && f == nil {
		return Served{err: fmt.Errorf("%w: nil batch handler for queue %s", ErrInvalid, q.name)}
	}
	bc, err := bc.withDefaults()
	if err != nil {
		return Served{err: fmt.Errorf("queue %s: %w", q.name, err)}
	}
	return Served{shards: q.shards, weight: opts.Weight, batchSize: bc.MaxSize,
		source: func(cfg WorkerConfig, decodeLogged *atomic.Bool) (pool.Source, error) {
			return batchSource(q, h, bc, cfg, decodeLogged)
		}}
}

// batchDefaults returns cfg with its defaults set (withDefaults), and for a worker with batch
// queues the default prefetch of one, and checks that each batch fits in what the worker holds.
// It fails with ErrInvalid.
func batchDefaults(cfg WorkerConfig, served ...Served) (WorkerConfig, error) {
	largest := 0
	for _, s := range served {
		largest = max(largest, s.batchSize)
	}
	if largest == 0 {
		return cfg.withDefaults()
	}
	conc := cmp.Or(cfg.Concurrency, 10)
	if cfg.Prefetch == 0 && conc > 0 && conc < engine.MaxFetch {
		// A fixed prefetch: the adaptive one measures tasks a handler finishes, and would stay
		// small while batches wait MaxWait to fill.
		cfg.Prefetch = min(conc*min(largest, engine.MaxFetch), engine.MaxFetch-conc)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, err
	}
	_, hi := cfg.prefetchRange()
	for _, s := range served {
		if s.batchSize > cfg.Concurrency+hi {
			return cfg, fmt.Errorf("%w: queue %s: BatchConfig.MaxSize %d is over the %d tasks the worker holds (Concurrency + Prefetch)",
				ErrInvalid, s.shards.name, s.batchSize, cfg.Concurrency+hi)
		}
	}
	return cfg, nil
}

// batchSource returns the pool's view of q served in batches by h: a batch handler over engine
// deliveries that decodes each payload and runs h, each task inside cfg's middleware. The first
// payload it cannot decode while logged is false is logged, at Error, and sets logged. It fails
// with ErrInvalid for a nil middleware, or one that returns a nil WorkFunc.
func batchSource[T any](q *Queue[T], h BatchHandler[T], bc BatchConfig, cfg WorkerConfig, logged *atomic.Bool) (pool.Source, error) {
	codec := q.codec
	name := q.name
	log := cfg.Logger.With("queue", name, "consumer", cfg.ConsumerID)
	decode := func(d *Delivery) (*Task[T], error) {
		var v T
		if err := codec.Unmarshal(d.Payload, &v); err != nil {
			if logged.CompareAndSwap(false, true) {
				log.Error("cannot decode a task's payload: it goes to the dead letters; is a producer using another codec or payload type? (later ones of this queue are not logged until the worker runs again)",
					"codec", codec.Name(), "task", d.ID, "err", err)
			}
			return nil, Permanent(err)
		}
		return &Task[T]{Value: v, Delivery: d}, nil
	}
	var run func(ctx context.Context, ds []*Delivery) []error
	if len(cfg.Middleware) == 0 {
		run = func(ctx context.Context, ds []*Delivery) []error {
			errs := make([]error, len(ds))
			tasks := make([]*Task[T], len(ds))
			for i, d := range ds {
				tasks[i], errs[i] = decode(d)
			}
			callPresent(ctx, h, tasks, errs)
			return errs
		}
	} else {
		// Each task goes through the middleware on its own goroutine; the innermost WorkFunc
		// decodes it and waits for the batch, which runs once every task arrived there or left
		// the chain without (a middleware that did not call next, or a payload not decoded).
		work := WorkFunc(func(ctx context.Context, d *Delivery) error {
			slot, _ := ctx.Value(batchSlotKey{}).(*batchSlot[T])
			if slot == nil {
				return fmt.Errorf("%w: a middleware of a batch worker called next with a context not derived from its own", ErrInvalid)
			}
			t, err := decode(d)
			if err != nil {
				return err
			}
			return slot.call.arrive(slot.i, t)
		})
		for i := len(cfg.Middleware) - 1; i >= 0; i-- {
			if cfg.Middleware[i] == nil {
				return pool.Source{}, fmt.Errorf("%w: Middleware %d is nil", ErrInvalid, i)
			}
			if work = cfg.Middleware[i](work); work == nil {
				return pool.Source{}, fmt.Errorf("%w: Middleware %d returned a nil WorkFunc", ErrInvalid, i)
			}
		}
		run = func(ctx context.Context, ds []*Delivery) []error {
			return runThroughMiddleware(ctx, h, work, ds)
		}
	}
	handle := func(ctx context.Context, eds []*engine.Delivery, engs []*engine.Engine) ([][]byte, []error) {
		ds := make([]*Delivery, len(eds))
		for i, ed := range eds {
			ds[i] = &Delivery{Delivery: *ed, Queue: name, codec: codec, maxResult: engs[i].Config().MaxResultBytes, eng: engs[i]}
		}
		errs := run(ctx, ds)
		results := make([][]byte, len(ds))
		for i, d := range ds {
			results[i] = d.result
			var wait *WaitError
			if errors.As(errs[i], &wait) && d.stateSet {
				w := *wait // a copy: the caller's error may be shared
				w.state = d.state
				errs[i] = &w
			}
		}
		return results, errs
	}
	b := &pool.Batch{MaxSize: bc.MaxSize, MaxWait: bc.MaxWait, Handle: handle}
	if bc.Group != nil {
		b.Group = func(ed *engine.Delivery) (group string) {
			defer func() {
				// Called as tasks are fetched, outside any handler: a panic would end the process.
				if v := recover(); v != nil {
					log.Error("BatchConfig.Group panicked; the task joins a group of its own kind", "task", ed.ID, "panic", v)
					group = "\x00panicked"
				}
			}()
			return bc.Group(&Delivery{Delivery: *ed, Queue: name})
		}
	}
	return pool.Source{Name: name, Engines: q.shards.engines, Batch: b, Logger: log}, nil
}

// callBatch runs h over tasks and returns each task's error (BatchHandler); a panic becomes a
// *PanicError for every task.
func callBatch[T any](ctx context.Context, h BatchHandler[T], tasks []*Task[T]) []error {
	err := func() (err error) {
		defer recoverPanic(&err)
		return h.HandleBatch(ctx, tasks)
	}()
	errs := make([]error, len(tasks))
	var be *BatchError
	switch {
	case err == nil:
	case errors.As(err, &be) && len(be.Errs) == len(tasks):
		copy(errs, be.Errs)
	case be != nil:
		err = fmt.Errorf("%w: BatchErrors has %d errors for a batch of %d tasks", ErrInvalid, len(be.Errs), len(tasks))
		fallthrough
	default:
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// callPresent runs h once over the tasks of byIndex that are not nil, in order, and writes each
// one's error to errs at its index; the others' errors are left as they are.
func callPresent[T any](ctx context.Context, h BatchHandler[T], byIndex []*Task[T], errs []error) {
	var tasks []*Task[T]
	var at []int
	for i, t := range byIndex {
		if t != nil {
			tasks, at = append(tasks, t), append(at, i)
		}
	}
	if len(tasks) == 0 {
		return
	}
	for k, err := range callBatch(ctx, h, tasks) {
		errs[at[k]] = err
	}
}

// batchSlotKey is the context key of a task's place in a batch run through middleware.
type batchSlotKey struct{}

// batchSlot is task i of a batch run through middleware.
type batchSlot[T any] struct {
	call *batchRun[T]
	i    int
}

// batchRun is one batch run through middleware: it gathers the tasks that reach the innermost
// WorkFunc, runs the handler once every task did or left, and gives each its error.
type batchRun[T any] struct {
	mu      sync.Mutex
	tasks   []*Task[T] // by index: the tasks that arrived
	settled []bool     // the task arrived, or its middleware returned without
	left    int        // tasks not settled yet
	started bool       // the handler runs (or ran): a task arriving now is too late
	ready   chan struct{}
	done    chan struct{} // closed once errs holds the handler's errors
	errs    []error
}

// arrive gives the batch task i and waits for its error. A task that arrives once the batch
// started, because its middleware called next after returning, gets an error.
func (b *batchRun[T]) arrive(i int, t *Task[T]) error {
	b.mu.Lock()
	if b.started {
		ran := b.tasks[i] != nil
		b.mu.Unlock()
		<-b.done
		if ran {
			return b.errs[i] // next called again: the same outcome
		}
		return errors.New("srq: a batch task reached its handler after its middleware returned")
	}
	if b.tasks[i] == nil {
		b.tasks[i] = t
		b.settleLocked(i)
	}
	b.mu.Unlock()
	<-b.done
	return b.errs[i]
}

// settleLocked marks task i as settled for the start. Called with mu held.
func (b *batchRun[T]) settleLocked(i int) {
	if !b.settled[i] {
		b.settled[i] = true
		if b.left--; b.left == 0 {
			close(b.ready)
		}
	}
}

// runThroughMiddleware runs each delivery of ds through work (the middleware over the innermost
// WorkFunc) on a goroutine of its own, h once over the tasks that reached the innermost, and
// returns each task's error as its middleware returned it.
func runThroughMiddleware[T any](ctx context.Context, h BatchHandler[T], work WorkFunc, ds []*Delivery) []error {
	b := &batchRun[T]{tasks: make([]*Task[T], len(ds)), settled: make([]bool, len(ds)), left: len(ds),
		ready: make(chan struct{}), done: make(chan struct{}), errs: make([]error, len(ds))}
	out := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			defer func() {
				b.mu.Lock()
				b.settleLocked(i)
				b.mu.Unlock()
			}()
			out[i] = func() (err error) {
				defer recoverPanic(&err)
				return work(context.WithValue(ctx, batchSlotKey{}, &batchSlot[T]{call: b, i: i}), d)
			}()
		})
	}
	<-b.ready
	b.mu.Lock()
	b.started = true
	b.mu.Unlock()
	callPresent(ctx, h, b.tasks, b.errs) // tasks is no longer written once started
	close(b.done)
	wg.Wait()
	return out
}
