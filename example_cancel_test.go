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

// Cancel a task that waits, which then never runs, and a task that runs: its handler's context
// ends with the cause srq.ErrCancelled, and the task is not retried. Both outcomes are kept, as
// the tasks asked (KeepResult), so ResultOf reports them as cancelled; a cancelled task cannot be
// cancelled again.
func ExampleQueue_Cancel() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "exports"})
	if err != nil {
		panic(err)
	}
	// A task due in an hour, cancelled while it waits.
	if _, err := q.Publish(ctx, "export 2025", &srq.PublishOpts{ID: "export-2025", Delay: time.Hour, KeepResult: time.Hour}); err != nil {
		panic(err)
	}
	if err := q.Cancel(ctx, "export-2025"); err != nil {
		panic(err)
	}

	// A task cancelled while its handler runs.
	if _, err := q.Publish(ctx, "export 2026", &srq.PublishOpts{ID: "export-2026", KeepResult: time.Hour}); err != nil {
		panic(err)
	}
	started := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		close(started)
		<-ctx.Done() // a long export, which stops when its context ends
		fmt.Println("handler stopped, cancelled:", errors.Is(context.Cause(ctx), srq.ErrCancelled))
		return context.Cause(ctx)
	}), srq.WorkerConfig{
		// A running task's handler hears of its cancellation when its lease is next extended,
		// every Lease/3.
		Lease:  time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ran := make(chan error)
	go func() {
		_, err := w.RunOnce(ctx)
		ran <- err
	}()
	<-started
	if err := q.Cancel(ctx, "export-2026"); err != nil {
		panic(err)
	}
	if err := <-ran; err != nil {
		panic(err)
	}

	for _, id := range []string{"export-2025", "export-2026"} {
		var failed *srq.TaskFailedError
		if _, err := srq.ResultOf[struct{}](ctx, q, id); errors.As(err, &failed) {
			fmt.Println(id, failed.State)
		}
	}
	fmt.Println("cancel again:", errors.Is(q.Cancel(ctx, "export-2026"), srq.ErrFinished))

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// handler stopped, cancelled: true
	// export-2025 cancelled
	// export-2026 cancelled
	// cancel again: true
}
