package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

type Order struct {
	ID    string
	Cents int
}

type Notice struct{ To, Text string }

// A flow over two queues of two payload types: charge an order, then send a notice and write an
// invoice in parallel, then complete the order with both of their results.
func ExamplePublishFlow() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	orders, err := srq.NewQueue[Order](client, srq.QueueConfig{Name: "orders"})
	if err != nil {
		panic(err)
	}
	notices, err := srq.NewQueue[Notice](client, srq.QueueConfig{Name: "notices"})
	if err != nil {
		panic(err)
	}

	order := Order{ID: "42", Cents: 1999}
	charge := orders.Step("charge", order, nil)
	notify := notices.Step("notify", Notice{To: "ann@example.com", Text: "paid"}, nil).After(charge)
	invoice := orders.Step("invoice", order, nil).After(charge)
	complete := orders.Step("complete", order, nil).After(notify, invoice)
	res, err := srq.PublishFlow(ctx, &srq.Flow{ID: "order-42", Steps: []*srq.Step{charge, notify, invoice, complete}})
	if err != nil {
		panic(err)
	}

	ow, err := srq.NewWorker(orders, srq.ResultHandlerFunc[Order, string](func(ctx context.Context, t *srq.Task[Order]) (string, error) {
		switch t.Step() {
		case "charge":
			return fmt.Sprintf("charged %d", t.Value.Cents), nil
		case "invoice":
			return "invoice INV-" + t.Value.ID, nil
		}
		sent, err := srq.ParentResult[string](ctx, t.Delivery, "notify")
		if err != nil {
			return "", err
		}
		inv, err := srq.ParentResult[string](ctx, t.Delivery, "invoice")
		return sent + ", " + inv, err
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	nw, err := srq.NewWorker(notices, srq.ResultHandlerFunc[Notice, string](func(ctx context.Context, t *srq.Task[Notice]) (string, error) {
		return "sent to " + t.Value.To, nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// Run both workers until the flow has completed.
	for {
		if _, err := ow.RunOnce(ctx); err != nil {
			panic(err)
		}
		if _, err := nw.RunOnce(ctx); err != nil {
			panic(err)
		}
		f, err := orders.Flow(ctx, res.ID)
		if err != nil {
			panic(err)
		}
		if f.State == srq.FlowCompleted {
			break
		}
	}
	f, err := orders.Flow(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	for _, s := range f.Steps {
		fmt.Println(s.Name, s.State)
	}
	summary, err := srq.ResultOf[string](ctx, orders, "order-42/complete")
	fmt.Println(summary, err)

	// Done with the queues: delete them (Force: this example's workers fetched from them just now).
	for _, name := range []string{orders.Name(), notices.Name()} {
		if _, err := srq.DeleteQueue(ctx, client, name, &srq.DeleteQueueOpts{Force: true}); err != nil {
			panic(err)
		}
	}
	// Output:
	// charge succeeded
	// notify succeeded
	// invoice succeeded
	// complete succeeded
	// sent to ann@example.com, invoice INV-42 <nil>
}

// Publish a task and wait for its result; cancel another before it runs.
func ExamplePublishAndWait() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[Order](client, srq.QueueConfig{Name: "charges"})
	if err != nil {
		panic(err)
	}
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[Order, string](func(ctx context.Context, t *srq.Task[Order]) (string, error) {
		return fmt.Sprintf("receipt for %s: %d cents", t.Value.ID, t.Value.Cents), nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	// Cancelled while it waits for its delay: it never runs.
	later, err := q.Publish(ctx, Order{ID: "later"}, &srq.PublishOpts{Delay: time.Hour, KeepResult: time.Hour})
	if err != nil {
		panic(err)
	}
	if err := q.Cancel(ctx, later.ID); err != nil {
		panic(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	receipt, err := srq.PublishAndWait[string](ctx, q, Order{ID: "42", Cents: 1999}, nil)
	fmt.Println(receipt, err)
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}

	var failed *srq.TaskFailedError
	_, err = srq.ResultOf[string](ctx, q, later.ID)
	fmt.Println(errors.As(err, &failed), failed.State)

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// receipt for 42: 1999 cents <nil>
	// true cancelled
}
