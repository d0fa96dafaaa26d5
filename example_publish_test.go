package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

// Publish with options: a priority that runs first in its ordered partition, a delay, a single
// attempt, and an id of the producer's own, which makes a publish safe to repeat. The queue's
// DedupWindow keeps refusing the id for an hour after the task is acked.
func ExampleQueue_Publish() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "mail", DedupWindow: time.Hour})
	if err != nil {
		panic(err)
	}
	tasks := []struct {
		value string
		opts  srq.PublishOpts
	}{
		{"ann: weekly digest", srq.PublishOpts{Partition: "ann", Ordered: true}},
		{"ann: password reset", srq.PublishOpts{Partition: "ann", Ordered: true, Priority: 10}}, // runs first
		{"trial ends tomorrow", srq.PublishOpts{Delay: 24 * time.Hour}},                         // not yet due
		{"bounced address", srq.PublishOpts{MaxAttempts: 1}},                                    // one failure dead-letters it
		{"welcome", srq.PublishOpts{ID: "welcome-ann"}},
		{"welcome", srq.PublishOpts{ID: "welcome-ann"}}, // a retried publish: a duplicate, nothing changes
	}
	for _, o := range tasks {
		res, err := q.Publish(ctx, o.value, &o.opts)
		if err != nil {
			panic(err)
		}
		if o.opts.ID != "" {
			fmt.Printf("published %s: duplicate %v\n", res.ID, res.Duplicate)
		}
	}

	var mu sync.Mutex
	var ran []string
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		mu.Lock()
		ran = append(ran, t.Value)
		mu.Unlock()
		if t.Value == "bounced address" {
			return errors.New("550 no such user")
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// RunOnce runs what is ready now; an ordered partition hands out one task at a time, so run
	// until nothing is left.
	for {
		n, err := w.RunOnce(ctx)
		if err != nil {
			panic(err)
		}
		if n == 0 {
			break
		}
	}
	ann := slices.DeleteFunc(ran, func(v string) bool { return !strings.HasPrefix(v, "ann:") })
	fmt.Println("ann's partition ran:", ann)

	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("acked %d, dead %d, pending %d\n", st.Acked, st.Dead, st.Pending)
	res, err := q.Publish(ctx, "welcome", &srq.PublishOpts{ID: "welcome-ann"})
	if err != nil {
		panic(err)
	}
	fmt.Println("welcome-ann once more, after its ack: duplicate", res.Duplicate)

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// published welcome-ann: duplicate false
	// published welcome-ann: duplicate true
	// ann's partition ran: [ann: password reset ann: weekly digest]
	// acked 3, dead 1, pending 1
	// welcome-ann once more, after its ack: duplicate true
}

// An ordered partition runs its tasks one at a time, in publish order, even when one of them
// fails: the tasks behind it wait for its retry. Other partitions go on meanwhile, and their
// tasks run in parallel with the first partition's.
func ExamplePublishOpts_ordered() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	type Deposit struct {
		Account string
		Seq     int
	}
	q, err := srq.NewQueue[Deposit](client, srq.QueueConfig{Name: "ledger"})
	if err != nil {
		panic(err)
	}
	var msgs []srq.Message[Deposit]
	for seq := 1; seq <= 3; seq++ {
		for _, account := range []string{"acct-1", "acct-2"} {
			msgs = append(msgs, srq.Message[Deposit]{Value: Deposit{account, seq},
				Opts: srq.PublishOpts{Partition: account, Ordered: true}})
		}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		panic(err)
	}

	var mu sync.Mutex
	runs := map[string][]string{}
	finished := make(chan struct{}, len(msgs))
	w, err := srq.NewWorker(q, srq.HandlerFunc[Deposit](func(ctx context.Context, t *srq.Task[Deposit]) error {
		mu.Lock()
		runs[t.Value.Account] = append(runs[t.Value.Account], fmt.Sprintf("#%d attempt %d", t.Value.Seq, t.Attempt))
		mu.Unlock()
		if t.Value.Account == "acct-1" && t.Value.Seq == 1 && t.Attempt == 1 {
			return srq.RejectWithDelay(50*time.Millisecond, errors.New("ledger locked"))
		}
		finished <- struct{}{}
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	for range msgs {
		<-finished
	}
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
	fmt.Println("acct-1:", runs["acct-1"])
	fmt.Println("acct-2:", runs["acct-2"])

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// acct-1: [#1 attempt 1 #1 attempt 2 #2 attempt 1 #3 attempt 1]
	// acct-2: [#1 attempt 1 #2 attempt 1 #3 attempt 1]
}
