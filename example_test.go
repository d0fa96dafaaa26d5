package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

type Event struct {
	User string
	Seq  int
}

// Publish per-user events to ordered partitions and process them with a pool of workers: each
// user's events arrive in order, even with 8 handlers running at once.
func ExampleWorker() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[Event](client, srq.QueueConfig{Name: "events"})
	if err != nil {
		panic(err)
	}
	var msgs []srq.Message[Event]
	for seq := 1; seq <= 3; seq++ {
		for _, user := range []string{"ann", "bob"} {
			msgs = append(msgs, srq.Message[Event]{Value: Event{user, seq}, Opts: srq.PublishOpts{Partition: user, Ordered: true}})
		}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		panic(err)
	}

	var mu sync.Mutex
	seen := map[string][]int{}
	var wg sync.WaitGroup
	wg.Add(len(msgs))
	w, err := srq.NewWorker(q, srq.HandlerFunc[Event](func(ctx context.Context, t *srq.Task[Event]) error {
		mu.Lock()
		seen[t.Value.User] = append(seen[t.Value.User], t.Value.Seq)
		mu.Unlock()
		wg.Done()
		return nil
	}), srq.WorkerConfig{Concurrency: 8, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	wg.Wait()
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
	fmt.Println("ann:", seen["ann"])
	fmt.Println("bob:", seen["bob"])

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// ann: [1 2 3]
	// bob: [1 2 3]
}

// A handler's error decides what happens to the task: here the first attempt is retried after a
// delay, and a permanent error sends another task to the dead letters.
func ExampleRejectWithDelay() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "jobs"})
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"flaky", "broken"} {
		if _, err := q.Publish(ctx, id, &srq.PublishOpts{ID: id}); err != nil {
			panic(err)
		}
	}

	finished := make(chan string, 2)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		switch {
		case t.Value == "broken":
			defer func() { finished <- "broken: dead-lettered" }()
			return srq.Permanent(errors.New("malformed input"))
		case t.Attempt == 1:
			return srq.RejectWithDelay(20*time.Millisecond, errors.New("downstream busy"))
		}
		finished <- fmt.Sprintf("flaky: done on attempt %d", t.Attempt)
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	results := []string{<-finished, <-finished}
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
	if results[0] > results[1] {
		results[0], results[1] = results[1], results[0]
	}
	fmt.Println(results[0])
	fmt.Println(results[1])
	page, err := q.DeadLetters(ctx, srq.DeadQuery{Limit: 10})
	if err != nil {
		panic(err)
	}
	for _, l := range page.Letters {
		fmt.Println("dead letter:", l.ID, "-", l.Error)
	}

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// broken: dead-lettered
	// flaky: done on attempt 2
	// dead letter: broken - malformed input
}

// Publishing is idempotent by id: a task whose id is still pending, leased or dead is reported as a
// duplicate and left unchanged, so a producer may safely retry a publish whose reply it lost.
func ExampleQueue_PublishBatch() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[Event](client, srq.QueueConfig{Name: "events"})
	if err != nil {
		panic(err)
	}
	batch := []srq.Message[Event]{
		{Value: Event{"ann", 1}, Opts: srq.PublishOpts{ID: "ann-1", Partition: "ann", Ordered: true}},
		{Value: Event{"ann", 2}, Opts: srq.PublishOpts{ID: "ann-2", Partition: "ann", Ordered: true, Delay: time.Minute}},
	}
	first, err := q.PublishBatch(ctx, batch)
	if err != nil {
		panic(err)
	}
	again, err := q.PublishBatch(ctx, batch) // the reply was lost: publish the same batch again
	if err != nil {
		panic(err)
	}
	for i := range batch {
		fmt.Printf("%s: first duplicate=%v, again duplicate=%v\n", first[i].ID, first[i].Duplicate, again[i].Duplicate)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("pending:", st.Pending)

	// Done with the queue: delete it.
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), nil); err != nil {
		panic(err)
	}
	// Output:
	// ann-1: first duplicate=false, again duplicate=true
	// ann-2: first duplicate=false, again duplicate=true
	// pending: 2
}

// Split a queue over shards, each with its own Redis Cluster hash tag, so a cluster spreads its
// work over the masters. A partition lives in one shard, so each user's events stay in order.
func ExampleQueueConfig_shards() {
	client, done := devredis.MustEmbedded() // a *redis.ClusterClient in production
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[Event](client, srq.QueueConfig{Name: "events", Shards: 4})
	if err != nil {
		panic(err)
	}
	for seq := 1; seq <= 3; seq++ {
		if _, err := q.Publish(ctx, Event{"ann", seq}, &srq.PublishOpts{Partition: "ann", Ordered: true}); err != nil {
			panic(err)
		}
	}
	var mu sync.Mutex
	var got []int
	w, err := srq.NewWorker(q, srq.HandlerFunc[Event](func(_ context.Context, t *srq.Task[Event]) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, t.Value.Seq)
		return nil
	}), srq.WorkerConfig{Concurrency: 4})
	if err != nil {
		panic(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(got, "acked:", st.Acked, "shards:", len(q.Shards()))

	// A producer that disagrees about the shard count is refused.
	q2, err := srq.NewQueue[Event](client, srq.QueueConfig{Name: "events", Shards: 2})
	if err != nil {
		panic(err)
	}
	_, err = q2.Publish(ctx, Event{"bob", 1}, nil)
	fmt.Println(errors.Is(err, srq.ErrShardCount))

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// [1 2 3] acked: 3 shards: 4
	// true
}
