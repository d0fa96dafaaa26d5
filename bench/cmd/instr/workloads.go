package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// A workload seeds queue, warms up, then runs calls measured calls between control("-z") (zero
// the counters) and control("-d") (dump them), and returns the tasks those calls handled.
type workload struct {
	name  string
	about string
	calls int // default
	run   runFunc
}

type runFunc func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(op string) error) (int, error)

var workloads = []workload{
	{"ackfetch", "one consumer, AckFetch of 5 over 100 unordered partitions", 200, consumeWorkload(false)},
	{"ordered", "one consumer, AckFetch of 5 over 100 ordered partitions", 200, consumeWorkload(true)},
	{"prefetch5", "one consumer, Ack of 5 then Fetch of 5 over 100 unordered partitions", 200, twoCallWorkload(1)},
	{"consumers8", "8 consumers at once, AckFetch of 5 each, merged calls", 50, parallelWorkload(engine.DefaultMaxMerge)},
	{"consumers8-alone", "8 consumers at once, AckFetch of 5 each, every call alone", 50, parallelWorkload(1)},
	{"parallel8", "8 consumers at once, Ack of 5 then Fetch of 5 each, merged calls", 50, twoCallWorkload(consumers)},
	{"publish1", "one task per Publish, 100 partitions", 400, publishWorkload(1)},
	{"producers8", "8 producers at once, one task per Publish each, merged calls", 50, parallelPublishWorkload(engine.DefaultMaxMerge)},
	{"producers8-alone", "8 producers at once, one task per Publish each, every call alone", 50, parallelPublishWorkload(1)},
	{"publish100", "batches of 100, 100 partitions", 40, publishWorkload(100)},
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
	consumers  = 8 // of parallelWorkload, and producers of parallelPublishWorkload
)

var payload20 = []byte("twenty bytes payload")

func partitionKey(i int, ordered bool) partition.Key {
	p := fmt.Sprint(i % partitions)
	if ordered {
		return partition.Ordered(p)
	}
	return partition.Key(p)
}

// consumeWorkload acks the last batch and fetches the next in one AckFetch call, as the worker does.
func consumeWorkload(ordered bool) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue})
		if err != nil {
			return 0, err
		}
		if err := seedConsume(ctx, e, (warmUp+calls)*fetchSize, ordered); err != nil {
			return 0, err
		}
		var receipts []engine.Receipt
		step := func() error { return ackFetch(ctx, e, "instr", &receipts) }
		return measured(calls, fetchSize, step, control)
	}
}

// parallelWorkload runs 8 consumers at once, each acking its last batch and fetching the next in
// one AckFetch call, on an engine that merges up to maxMerge concurrent calls. A step is one call
// of each consumer; how the engine merges them depends on their timing, so the instructions per
// task vary more from run to run than the one consumer's.
func parallelWorkload(maxMerge int) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue, MaxMerge: maxMerge})
		if err != nil {
			return 0, err
		}
		if err := seedConsume(ctx, e, (warmUp+calls)*fetchSize*consumers, false); err != nil {
			return 0, err
		}
		receipts := make([][]engine.Receipt, consumers)
		step := atOnce(func(i int) error { return ackFetch(ctx, e, fmt.Sprint("instr-", i), &receipts[i]) })
		return measured(calls, fetchSize*consumers, step, control)
	}
}

// twoCallWorkload runs n consumers at once, each acking its last batch and then fetching the
// next in two calls, the baseline's shape (BenchmarkConsumePrefetch/prefetch-5 with one consumer,
// BenchmarkConsumeParallel/consumers-8 with 8), on an engine that merges concurrent calls.
func twoCallWorkload(n int) runFunc {
	return func(ctx context.Context, c redis.UniversalClient, queue string, calls int, control func(string) error) (int, error) {
		e, err := engine.New(c, engine.Config{Queue: queue})
		if err != nil {
			return 0, err
		}
		if err := seedConsume(ctx, e, (warmUp+calls)*fetchSize*n, false); err != nil {
			return 0, err
		}
		receipts := make([][]engine.Receipt, n)
		consume := func(i int) error {
			if len(receipts[i]) > 0 {
				if _, err := e.Ack(ctx, receipts[i]); err != nil {
					return err
				}
			}
			ds, err := e.Fetch(ctx, fmt.Sprint("instr-", i), fetchSize, time.Minute)
			if err != nil {
				return err
			}
			return keep(ds, &receipts[i])
		}
		step := func() error { return consume(0) }
		if n > 1 {
			step = atOnce(consume)
		}
		return measured(calls, fetchSize*n, step, control)
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

// ackFetch acks *receipts and fetches the next batch for consumer into them.
func ackFetch(ctx context.Context, e *engine.Engine, consumer string, receipts *[]engine.Receipt) error {
	_, ds, _, err := e.AckFetch(ctx, *receipts, consumer, fetchSize, time.Minute)
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
func publishWorkload(size int) runFunc {
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
		step := atOnce(func(int) error {
			msg := engine.Message{Partition: partitionKey(int(next.Add(1)), false), Payload: payload20}
			_, err := e.Publish(ctx, []engine.Message{msg})
			return err
		})
		return measured(calls, consumers, step, control)
	}
}

// atOnce returns a step that runs call(i) for each of the 8 callers (consumers) at once and
// waits for all of them.
func atOnce(call func(i int) error) func() error {
	return func() error {
		var g errgroup.Group
		for i := range consumers {
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
