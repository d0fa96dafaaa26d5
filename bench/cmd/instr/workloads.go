package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/lua"
	"github.com/srqueue/srq/partition"
)

// A workload seeds queue, warms up, then runs calls measured calls between control("-z") (zero
// the counters) and control("-d") (dump them), and returns the tasks those calls handled.
type workload struct {
	name  string
	about string
	calls int    // default
	unit  string // what calls counts: "steps", or "tasks" for a workload that runs on its own
	run   runFunc
	// modeless: the workload calls Lua of its own, not the engine, so the engine's mode
	// (-scripts) changes nothing and it runs once.
	modeless bool
}

type runFunc func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(op string) error) (int, error)

var workloads = []workload{
	{name: "ackfetch", about: "one consumer, AckFetch of 5 over 100 unordered partitions", calls: 200, unit: "steps", run: consumeWorkload(1, 0, false, ackFetch)},
	{name: "ordered", about: "one consumer, AckFetch of 5 over 100 ordered partitions", calls: 200, unit: "steps", run: consumeWorkload(1, 0, true, ackFetch)},
	{name: "prefetch5", about: "one consumer, Ack of 5 then Fetch of 5 over 100 unordered partitions", calls: 200, unit: "steps", run: consumeWorkload(1, 0, false, ackThenFetch)},
	{name: "consumers8", about: "8 consumers at once, AckFetch of 5 each, merged calls", calls: 50, unit: "steps", run: consumeWorkload(consumers, engine.DefaultMaxMerge, false, ackFetch)},
	{name: "consumers8-alone", about: "8 consumers at once, AckFetch of 5 each, every call alone", calls: 50, unit: "steps", run: consumeWorkload(consumers, 1, false, ackFetch)},
	{name: "parallel8", about: "8 consumers at once, Ack of 5 then Fetch of 5 each, merged calls", calls: 50, unit: "steps", run: consumeWorkload(consumers, 0, false, ackThenFetch)},
	{name: "worker", about: "srq's Worker, 8 handlers that return at once, the default prefetch, over a full queue", calls: 2000, unit: "tasks", run: workerWorkload},
	{name: "publish1", about: "one task per Publish, 100 partitions", calls: 400, unit: "steps", run: publishWorkload(1)},
	{name: "producers8", about: "8 producers at once, one task per Publish each, merged calls", calls: 50, unit: "steps", run: parallelPublishWorkload(engine.DefaultMaxMerge)},
	{name: "producers8-alone", about: "8 producers at once, one task per Publish each, every call alone", calls: 50, unit: "steps", run: parallelPublishWorkload(1)},
	{name: "publish1-one", about: "one task per Publish, all in one partition", calls: 400, unit: "steps", run: publishOver(1, 1)},
	{name: "publish100-one", about: "batches of 100, all in one partition", calls: 40, unit: "steps", run: publishOver(100, 1)},
	{name: "publish100", about: "batches of 100, 100 partitions", calls: 40, unit: "steps", run: publishWorkload(100)},
	// What a script's helper definitions cost per call: defs-<script> less defs-none.
	{name: "defs-none", about: "return 1 with the scripts' 2 keys and key base, the bare call", calls: 400, unit: "calls", run: definitionsWorkload(""), modeless: true},
	{name: "defs-publish", about: "publish.lua's prologue (lua.Prologue), then return 1", calls: 400, unit: "calls", run: definitionsWorkload("publish"), modeless: true},
	{name: "defs-ack", about: "ack.lua's prologue, then return 1", calls: 400, unit: "calls", run: definitionsWorkload("ack"), modeless: true},
	{name: "defs-fetch", about: "fetch.lua's prologue, then return 1", calls: 400, unit: "calls", run: definitionsWorkload("fetch"), modeless: true},
	{name: "defs-ackfetch", about: "ack_fetch.lua's prologue, then return 1", calls: 400, unit: "calls", run: definitionsWorkload("ack_fetch"), modeless: true},
}

func workloadNames() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

const (
	warmUp     = 20 // calls before the counters are zeroed: scripts loaded, keys and sets created
	partitions = 100
	fetchSize  = 5
	consumers  = 8 // of the 8-consumer workloads and the worker's handlers, and producers of parallelPublishWorkload
)

var payload20 = []byte("twenty bytes payload")

func partitionKey(i int, ordered bool) partition.Key {
	p := fmt.Sprint(i % partitions)
	if ordered {
		return partition.Ordered(p)
	}
	return partition.Key(p)
}

// consumeCall acks a consumer's last batch and fetches the next into receipts, for the next ack.
type consumeCall func(ctx context.Context, e *engine.Engine, consumer string, receipts *[]engine.Receipt) error

// consumeWorkload runs n consumers, each acking its last batch and fetching the next with call,
// over ordered or unordered partitions, on an engine that merges up to maxMerge concurrent calls
// (0: the default). A step is one call of each consumer, the 8 at once. How the engine merges
// calls depends on their timing, so with 8 the instructions per task vary more from run to run
// than with one.
func consumeWorkload(n, maxMerge int, ordered bool, call consumeCall) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue, MaxMerge: maxMerge})
		if err != nil {
			return 0, err
		}
		if err := seedConsume(ctx, e, (warmUp+calls)*fetchSize*n, ordered); err != nil {
			return 0, err
		}
		receipts := make([][]engine.Receipt, n)
		consume := func(i int) error { return call(ctx, e, fmt.Sprint("instr-", i), &receipts[i]) }
		step := func() error { return consume(0) }
		if n > 1 {
			step = atOnce(n, consume)
		}
		return measured(calls, fetchSize*n, step, control)
	}
}

// workerWorkload runs srq's Worker (Concurrency 8, the default Prefetch, handlers that return at
// once) over a queue seeded with enough tasks; calls counts tasks here, not steps. The counters are
// zeroed once warmUp*fetchSize*consumers tasks are done and dumped once calls more are; the worker
// does not stop at these marks, so the fetches and acks in flight around them fall on either side,
// and the figure moves by about 1 % from run to run, as the 8-consumer workloads' do.
func workerWorkload(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
	q, err := srq.NewQueue[[]byte](c, srq.QueueConfig{Name: queue, Codec: codec.Raw{}})
	if err != nil {
		return 0, err
	}
	warm := int64(warmUp * fetchSize * consumers)
	if err := seedConsume(ctx, q.Engine(), int(warm)+2*calls, false); err != nil {
		return 0, err
	}
	var done atomic.Int64
	warmed, measured := make(chan struct{}), make(chan struct{})
	var end atomic.Int64 // the count of done tasks at which to dump; 0 until the counters are zeroed
	var measuredOnce sync.Once
	h := srq.HandlerFunc[[]byte](func(context.Context, *srq.Task[[]byte]) error {
		n := done.Add(1)
		if n == warm {
			close(warmed)
		}
		if e := end.Load(); e > 0 && n >= e {
			measuredOnce.Do(func() { close(measured) })
		}
		return nil
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: consumers,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	stop := func(err error) (int, error) {
		cancel()
		return 0, errors.Join(err, <-ran)
	}
	if err := waitFor(ctx, warmed, ran); err != nil {
		return stop(err)
	}
	if err := control("-z"); err != nil {
		return stop(err)
	}
	start := done.Load()
	end.Store(start + int64(calls))
	if done.Load() >= start+int64(calls) { // the handlers got there before end was set
		measuredOnce.Do(func() { close(measured) })
	}
	if err := waitFor(ctx, measured, ran); err != nil {
		return stop(err)
	}
	if err := control("-d"); err != nil {
		return stop(err)
	}
	cancel()
	if err := <-ran; err != nil {
		return 0, err
	}
	return calls, nil
}

// waitFor waits until ch closes, failing if the worker's Run returns first or after a minute.
func waitFor(ctx context.Context, ch <-chan struct{}, ran <-chan error) error {
	select {
	case <-ch:
		return nil
	case err := <-ran:
		return fmt.Errorf("the worker stopped early: %v", err)
	case <-time.After(time.Minute):
		return errors.New("the worker did not get through its tasks within a minute")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// seedConsume publishes enough tasks over the partitions for every call to find a full batch.
func seedConsume(ctx context.Context, e *engine.Engine, fetched int, ordered bool) error {
	total := fetched + partitions
	for i := 0; i < total; i += 500 {
		msgs := make([]engine.Message, 0, 500)
		for j := i; j < min(i+500, total); j++ {
			msgs = append(msgs, engine.Message{Partition: partitionKey(j, ordered), Payload: payload20})
		}
		if _, err := e.Publish(ctx, msgs); err != nil {
			return err
		}
	}
	return nil
}

// ackFetch acks *receipts and fetches the next batch for consumer into them in one AckFetch
// call, as the worker does.
func ackFetch(ctx context.Context, e *engine.Engine, consumer string, receipts *[]engine.Receipt) error {
	_, ds, _, err := e.AckFetch(ctx, *receipts, consumer, fetchSize, time.Minute)
	if err != nil {
		return err
	}
	return keep(ds, receipts)
}

// ackThenFetch does the same in two calls, Ack and then Fetch: the baseline's shape
// (BenchmarkConsumePrefetch/prefetch-5 with one consumer, BenchmarkConsumeParallel/consumers-8
// with 8).
func ackThenFetch(ctx context.Context, e *engine.Engine, consumer string, receipts *[]engine.Receipt) error {
	if len(*receipts) > 0 {
		if _, err := e.Ack(ctx, *receipts); err != nil {
			return err
		}
	}
	ds, err := e.Fetch(ctx, consumer, fetchSize, time.Minute)
	if err != nil {
		return err
	}
	return keep(ds, receipts)
}

// keep checks that ds is a full batch and puts its receipts into *receipts, for the next ack.
func keep(ds []engine.Delivery, receipts *[]engine.Receipt) error {
	if len(ds) != fetchSize {
		return fmt.Errorf("fetched %d tasks, want %d", len(ds), fetchSize)
	}
	*receipts = (*receipts)[:0]
	for _, d := range ds {
		*receipts = append(*receipts, d.Receipt())
	}
	return nil
}

// publishWorkload publishes batches of size tasks, spread over the partitions in turn.
func publishWorkload(size int) runFunc { return publishOver(size, 0) }

// publishOver is publishWorkload with every task in partition part when part > 0 (the key of
// partitionKey(part)), else over 100 partitions in turn.
func publishOver(size, part int) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue})
		if err != nil {
			return 0, err
		}
		msgs := make([]engine.Message, size)
		next := 0
		step := func() error {
			for j := range msgs {
				msgs[j] = engine.Message{Partition: partitionKey(next, false), Payload: payload20}
				if part > 0 {
					msgs[j].Partition = partitionKey(part, false)
				}
				next++
			}
			_, err := e.Publish(ctx, msgs)
			return err
		}
		return measured(calls, size, step, control)
	}
}

// parallelPublishWorkload runs 8 producers at once, each publishing one task per call, on an
// engine that merges up to maxMerge concurrent calls. A step is one call of each producer.
func parallelPublishWorkload(maxMerge int) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue, MaxMerge: maxMerge})
		if err != nil {
			return 0, err
		}
		var next atomic.Int64
		step := atOnce(consumers, func(int) error {
			msg := engine.Message{Partition: partitionKey(int(next.Add(1)), false), Payload: payload20}
			_, err := e.Publish(ctx, []engine.Message{msg})
			return err
		})
		return measured(calls, consumers, step, control)
	}
}

// atOnce returns a step that runs call(i) for each of n callers at once and waits for all of them.
func atOnce(n int, call func(i int) error) func() error {
	return func() error {
		var g errgroup.Group
		for i := range n {
			g.Go(func() error { return call(i) })
		}
		return g.Wait()
	}
}

// measured runs step warmUp times, then calls times between zeroing and dumping the counters.
func measured(calls, tasksPerCall int, step func() error, control func(string) error) (int, error) {
	for i := 0; i < warmUp; i++ {
		if err := step(); err != nil {
			return 0, err
		}
	}
	if err := control("-z"); err != nil {
		return 0, err
	}
	for i := 0; i < calls; i++ {
		if err := step(); err != nil {
			return 0, err
		}
	}
	if err := control("-d"); err != nil {
		return 0, err
	}
	return calls * tasksPerCall, nil
}

// definitionsWorkload calls the prologue of script name (lua.Prologue: its header and includes
// with the helpers it keeps, without its own code) followed by "return 1", or "return 1" alone
// for name "", with the 2 keys and the key base every srq script gets. The count is what a call
// costs before the script's own code runs: the call itself, and for a prologue the top-level
// statements and the helpers' closures, made anew on every call.
func definitionsWorkload(name string) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		src := "return 1"
		if name != "" {
			pro, err := lua.Prologue(name)
			if err != nil {
				return 0, err
			}
			src = pro + "\nreturn 1\n"
		}
		k, err := engine.NewKeys(engine.DefaultPrefix, queue)
		if err != nil {
			return 0, err
		}
		keys := k.ScriptKeys()
		script := redis.NewScript(src)
		step := func() error { return script.Run(ctx, c, keys, k.Base()).Err() }
		return measured(calls, 1, step, control)
	}
}
