package engine_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// exampleEngine starts an embedded Redis and an engine of queue on it, for an example; real code
// passes its own client.
func exampleEngine(queue string) (*engine.Engine, func()) {
	client, stop := devredis.MustEmbedded()
	e, err := engine.New(client, engine.Config{Queue: queue})
	if err != nil {
		panic(err)
	}
	return e, stop
}

// Publish to an ordered partition, lease the tasks and ack them with their fencing tokens.
func ExampleEngine() {
	e, done := exampleEngine("orders")
	defer done()
	ctx := context.Background()
	order := partition.Ordered("order-42")
	if _, err := e.Publish(ctx, []engine.Message{
		{ID: "created", Partition: order, Payload: []byte("v1")},
		{ID: "paid", Partition: order, Payload: []byte("v2")},
	}); err != nil {
		panic(err)
	}
	ds, err := e.Fetch(ctx, "worker-1", 10, 30*time.Second)
	if err != nil {
		panic(err)
	}
	var receipts []engine.Receipt
	for _, d := range ds {
		fmt.Printf("%s %s attempt %d\n", d.ID, d.Payload, d.Attempt)
		receipts = append(receipts, d.Receipt())
	}
	errs, err := e.Ack(ctx, receipts)
	if err != nil {
		panic(err)
	}
	fmt.Println("ack errors:", errs)
	// Output:
	// created v1 attempt 1
	// paid v2 attempt 1
	// ack errors: [<nil> <nil>]
}

// A consumer's loop without a worker: fetch, and when nothing is ready, wait in Redis for a
// publish instead of polling. A consumer that is woken but cannot take work now hands the
// wake-up on with Wake, so another sleeper fetches it.
func ExampleEngine_Wait() {
	e, done := exampleEngine("jobs")
	defer done()
	ctx := context.Background()
	published := make(chan error, 1)
	go func() { // a producer elsewhere
		time.Sleep(50 * time.Millisecond)
		_, err := e.Publish(ctx, []engine.Message{{ID: "resize-1"}})
		published <- err
	}()
	for {
		ds, nextDue, err := e.FetchNext(ctx, "worker-1", 10, 30*time.Second)
		if err != nil {
			panic(err)
		}
		if len(ds) > 0 {
			fmt.Println("fetched", ds[0].ID)
			break
		}
		wait := 5 * time.Second
		if nextDue >= 0 {
			wait = min(wait, nextDue) // a delayed task falls due sooner
		}
		woken, err := e.Wait(ctx, wait)
		if err != nil {
			panic(err)
		}
		fmt.Println("woken:", woken)
	}
	if err := <-published; err != nil {
		panic(err)
	}
	// Output:
	// woken: true
	// fetched resize-1
}

// A consumer woken while it has no room for work hands the wake-up on, so another consumer
// blocked in Wait (here, the second call) takes the work at once.
func ExampleEngine_Wake() {
	e, done := exampleEngine("jobs")
	defer done()
	ctx := context.Background()
	if _, err := e.Publish(ctx, []engine.Message{{ID: "a"}}); err != nil {
		panic(err)
	}
	woken, _ := e.Wait(ctx, time.Second) // takes the publish's wake-up token
	busy := true                         // say every handler of this consumer is taken
	if woken && busy {
		if err := e.Wake(ctx); err != nil {
			panic(err)
		}
	}
	other, _ := e.Wait(ctx, time.Second) // another consumer's wait
	fmt.Println(woken, other)
	// Output:
	// true true
}

// A consumer's steady state in one round trip per batch: ack what it finished and lease the next
// tasks in the same call. The ordered partition released by the ack is served at once.
func ExampleEngine_AckFetch() {
	e, done := exampleEngine("accounts")
	defer done()
	ctx := context.Background()
	acct := partition.Ordered("acct-7")
	if _, err := e.Publish(ctx, []engine.Message{{ID: "debit"}, {ID: "credit"}, {ID: "close"}}); err != nil {
		panic(err)
	}
	if _, err := e.Publish(ctx, []engine.Message{{ID: "open", Partition: acct}, {ID: "deposit", Partition: acct}}); err != nil {
		panic(err)
	}
	var receipts []engine.Receipt
	for round := 1; ; round++ {
		errs, ds, _, err := e.AckFetch(ctx, receipts, "worker-1", 2, 30*time.Second)
		if err != nil {
			panic(err)
		}
		if len(ds) == 0 {
			fmt.Println("round", round, "acked", len(errs), "and found nothing more")
			break
		}
		receipts = receipts[:0]
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
			receipts = append(receipts, d.Receipt())
		}
		fmt.Println("round", round, "acked", len(errs), "fetched", ids)
	}
	// Output:
	// round 1 acked 0 fetched [debit open]
	// round 2 acked 2 fetched [credit deposit]
	// round 3 acked 2 fetched [close]
	// round 4 acked 1 and found nothing more
}

// Consumers that share one Engine may call it at the same moment: the calls that meet go out as
// one script call (up to Config.MaxMerge of them), and each consumer gets its own tasks, leased to
// it, as from a call of its own.
func ExampleConfig_maxMerge() {
	e, done := exampleEngine("events")
	defer done()
	ctx := context.Background()
	var msgs []engine.Message
	for i := range 40 {
		msgs = append(msgs, engine.Message{ID: fmt.Sprintf("e%02d", i), Partition: partition.Key(fmt.Sprint("user-", i%8))})
	}
	if _, err := e.Publish(ctx, msgs); err != nil {
		panic(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			consumer := fmt.Sprint("consumer-", c)
			var receipts []engine.Receipt
			for {
				_, ds, _, err := e.AckFetch(ctx, receipts, consumer, 5, 30*time.Second)
				if err != nil {
					panic(err)
				}
				if len(ds) == 0 && len(receipts) == 0 {
					return
				}
				receipts = receipts[:0]
				mu.Lock()
				for _, d := range ds {
					seen[d.ID]++
					receipts = append(receipts, d.Receipt())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	once := 0
	for _, n := range seen {
		if n == 1 {
			once++
		}
	}
	st, err := e.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(once, "tasks delivered once each;", st.Acked, "acked,", st.InFlight, "in flight")
	// Output:
	// 40 tasks delivered once each; 40 acked, 0 in flight
}
