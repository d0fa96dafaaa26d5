package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/engine"
)

// A queue with an event stream (QueueConfig.Events) reports every change of its tasks: here a
// task acked, one dead-lettered and one cancelled. A reader that stops keeps the last event's
// Cursor, and resumes right after it.
func ExampleQueue_Events() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "invoices", Events: 1000})
	if err != nil {
		panic(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Value == "" {
			return srq.Permanent(errors.New("empty invoice"))
		}
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	for _, inv := range []struct{ id, value string }{{"inv-1", "EUR 12.00"}, {"inv-2", ""}} {
		if _, err := q.Publish(ctx, inv.value, &srq.PublishOpts{ID: inv.id}); err != nil {
			panic(err)
		}
		if _, err := w.RunOnce(ctx); err != nil {
			panic(err)
		}
	}
	if _, err := q.Publish(ctx, "EUR 5.00", &srq.PublishOpts{ID: "inv-3", Delay: time.Hour}); err != nil {
		panic(err)
	}
	if err := q.Cancel(ctx, "inv-3"); err != nil {
		panic(err)
	}

	show := func(ev srq.Event) {
		if ev.Error != "" {
			fmt.Printf("%s %s: %s\n", ev.Kind, ev.ID, ev.Error)
			return
		}
		fmt.Println(ev.Kind, ev.ID)
	}
	// Read from the oldest event the stream keeps ("0"), and stop after three.
	var cursor string
	n := 0
	for ev, err := range q.Events(ctx, "0") {
		if err != nil {
			panic(err)
		}
		show(ev)
		cursor = ev.Cursor
		if n++; n == 3 {
			break
		}
	}
	// Resume after the last event read: the events are read once each, in order.
	fmt.Println("-- resumed")
	for ev, err := range q.Events(ctx, cursor) {
		if err != nil {
			panic(err)
		}
		show(ev)
		if ev.Kind == engine.EventCancelled {
			break
		}
	}

	// Done with the queue: delete it, with its event stream (Force: this example's worker
	// fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// published inv-1
	// acked inv-1
	// published inv-2
	// -- resumed
	// dead inv-2: empty invoice
	// published inv-3
	// cancelled inv-3: cancelled
}
