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
)

// A batch worker that writes page views to a store in bulk, one batch per tenant (a header the
// publisher sets): the handler gets up to MaxSize tasks at once and acks them all, or gives each
// task its own error with srq.BatchErrors. Here a malformed view is dead-lettered and the rest of
// its batch is acked.
func ExampleNewBatchWorker() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "page-views"})
	if err != nil {
		panic(err)
	}
	var msgs []srq.Message[string]
	for _, v := range []struct{ tenant, page string }{
		{"acme", "/home"}, {"globex", "/pricing"}, {"acme", "/docs"}, {"acme", "?"}, {"globex", "/home"},
	} {
		msgs = append(msgs, srq.Message[string]{Value: v.page, Opts: srq.PublishOpts{
			ID: v.tenant + v.page, Headers: map[string]string{"tenant": v.tenant}}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		panic(err)
	}

	w, err := srq.NewBatchWorker(q, srq.BatchHandlerFunc[string](func(ctx context.Context, tasks []*srq.Task[string]) error {
		errs := make([]error, len(tasks))
		var pages []string
		for i, t := range tasks {
			if !strings.HasPrefix(t.Value, "/") {
				errs[i] = srq.Permanent(errors.New("not a path"))
				continue
			}
			pages = append(pages, t.Value)
		}
		// One bulk write of the batch's pages, within ctx's deadline.
		fmt.Printf("%s: %s\n", tasks[0].Headers["tenant"], strings.Join(pages, " "))
		return srq.BatchErrors(errs)
	}), srq.BatchConfig{MaxSize: 100, MaxWait: 100 * time.Millisecond, Group: srq.ByHeader("tenant")}, srq.WorkerConfig{
		Concurrency: 1, // one batch at a time, so the output's order is fixed
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	// RunOnce runs every batch of what is ready now, without waiting for MaxWait.
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}
	page, err := q.DeadLetters(ctx, srq.DeadQuery{Limit: 10})
	if err != nil {
		panic(err)
	}
	for _, l := range page.Letters {
		fmt.Printf("dead letter %s: %s\n", l.ID, l.Error)
	}

	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Unordered output:
	// acme: /home /docs
	// globex: /pricing /home
	// dead letter acme?: not a path
}
