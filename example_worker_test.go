package srq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/middleware"
)

// errBadAddress is the error of a handler given an address no retry can fix.
var errBadAddress = errors.New("bad address")

// A worker with middleware, first outermost: one that reports each delivery and what became of
// it, one that turns a handler's validation error into srq.Permanent (dead-lettered at once, not
// retried), and the middleware package's Timeout around the handler. Middleware sees the
// *srq.Delivery, not the payload, so one middleware serves queues of every payload type.
func ExampleNewWorker() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "welcome-mail"})
	if err != nil {
		panic(err)
	}
	for _, to := range []string{"ann@example.com", "bob"} {
		if _, err := q.Publish(ctx, to, &srq.PublishOpts{ID: "welcome-" + to, Partition: "signups", Ordered: true}); err != nil {
			panic(err)
		}
	}

	report := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			err := next(ctx, d)
			fmt.Printf("%s %s attempt %d: %v\n", d.Queue, d.ID, d.Attempt, err)
			return err
		}
	}
	permanentIfBadAddress := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			err := next(ctx, d)
			if errors.Is(err, errBadAddress) {
				return srq.Permanent(err)
			}
			return err
		}
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if !strings.Contains(t.Value, "@") {
			return fmt.Errorf("%w %q", errBadAddress, t.Value)
		}
		return nil // send the mail, within ctx's deadline
	}), srq.WorkerConfig{
		Concurrency: 1,
		Middleware:  []srq.Middleware{report, permanentIfBadAddress, middleware.Timeout(10 * time.Second)},
		Logger:      slog.New(slog.DiscardHandler),
	})
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
	page, err := q.DeadLetters(ctx, srq.DeadQuery{Limit: 10})
	if err != nil {
		panic(err)
	}
	for _, l := range page.Letters {
		fmt.Printf("dead letter %s after %d attempt: %s\n", l.ID, l.Attempts, l.Error)
	}

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// welcome-mail welcome-ann@example.com attempt 1: <nil>
	// welcome-mail welcome-bob attempt 1: srq: permanent failure: bad address "bob"
	// dead letter welcome-bob after 1 attempt: bad address "bob"
}
