package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/inspect"
)

// A task that can never succeed as it is goes to the dead letters at once instead of using up its
// attempts. Once the cause is fixed, an operator finds the letters by their error and requeues
// them, here with the inspect package (the dashboard and the srq command do the same).
func ExamplePermanent() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q := must(srq.NewQueue[string](client, srq.QueueConfig{Name: "invoices"}))
	must(q.Publish(ctx, "EUR 12.00", &srq.PublishOpts{ID: "inv-1"}))
	must(q.Publish(ctx, "XBT 0.01", &srq.PublishOpts{ID: "inv-2"}))
	var fixed atomic.Bool // the fix, deployed later
	w := must(srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if strings.HasPrefix(t.Value, "XBT") && !fixed.Load() {
			return srq.Permanent(errors.New("unknown currency"))
		}
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)}))
	must(w.RunOnce(ctx))

	in := must(inspect.New(client, inspect.Config{}))
	page := must(in.DeadLetters(ctx, "invoices", inspect.DeadQuery{ErrorContains: "currency"}))
	for _, l := range page.Letters {
		fmt.Println("dead:", l.ID, "-", l.Error)
	}

	fixed.Store(true)
	n := must(in.RequeueDead(ctx, "invoices", inspect.DeadSelector{Filter: &inspect.DeadQuery{ErrorContains: "currency"}}))
	fmt.Println("requeued:", n)
	must(w.RunOnce(ctx))
	st := must(in.Stats(ctx, "invoices"))
	fmt.Println("acked:", st.Acked, "dead:", st.Dead)

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	must(srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}))
	// Output:
	// dead: inv-2 - unknown currency
	// requeued: 1
	// acked: 2 dead: 0
}

// Snooze hands a task back without counting the delivery as an attempt: for waits that are not
// failures, such as a partner's rate limit. Here the task has a single attempt, yet survives a
// snooze.
func ExampleSnooze() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q := must(srq.NewQueue[string](client, srq.QueueConfig{Name: "sms"}))
	must(q.Publish(ctx, "hello", &srq.PublishOpts{MaxAttempts: 1}))

	var limited atomic.Bool
	limited.Store(true) // the partner's rate limit, lifted after the first delivery
	sent := make(chan struct{})
	w := must(srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if limited.Swap(false) {
			fmt.Println("attempt", t.Attempt, "snoozed")
			return srq.Snooze(20 * time.Millisecond)
		}
		fmt.Println("attempt", t.Attempt, "sent", t.Value)
		close(sent)
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)}))
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	<-sent
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// attempt 1 snoozed
	// attempt 1 sent hello
}

// must returns v, or panics with err: an example's way to stop at an error real code would handle.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
