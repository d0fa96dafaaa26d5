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

// Thumbnail is the result of a thumbnail task.
type Thumbnail struct {
	Path          string
	Width, Height int
}

// A handler gives its task a result with SetResult; a task published with KeepResult keeps it
// (or why it failed) for that long after it ends, for ResultOf to read, with the result's own
// type.
func ExampleResultOf() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "thumbnails"})
	if err != nil {
		panic(err)
	}
	for _, img := range []string{"cat.jpg", "dog.tiff"} {
		if _, err := q.Publish(ctx, img, &srq.PublishOpts{ID: "thumb-" + img, KeepResult: time.Hour}); err != nil {
			panic(err)
		}
	}
	_, err = srq.ResultOf[Thumbnail](ctx, q, "thumb-cat.jpg")
	fmt.Println("before it ran:", errors.Is(err, srq.ErrNotEnded), err)

	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		name, ok := strings.CutSuffix(t.Value, ".jpg")
		if !ok {
			return srq.Permanent(errors.New("unsupported format"))
		}
		return t.SetResult(Thumbnail{Path: "thumbs/" + name + ".png", Width: 128, Height: 96})
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}

	thumb, err := srq.ResultOf[Thumbnail](ctx, q, "thumb-cat.jpg")
	fmt.Printf("cat.jpg: %+v %v\n", thumb, err)
	var failed *srq.TaskFailedError
	_, err = srq.ResultOf[Thumbnail](ctx, q, "thumb-dog.tiff")
	if errors.As(err, &failed) {
		fmt.Printf("dog.tiff: %s: %s\n", failed.State, failed.Reason)
	}

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// before it ran: true srq: the task has not ended: task thumb-cat.jpg is pending
	// cat.jpg: {Path:thumbs/cat.png Width:128 Height:96} <nil>
	// dog.tiff: dead: unsupported format
}

// A task published with Wait can be waited for by its id, in any process: WaitResult blocks in
// Redis until the task ends, and returns at once for a task that has ended already. A handler
// written as a ResultHandlerFunc returns its result.
func ExampleWaitResult() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "quotes"})
	if err != nil {
		panic(err)
	}
	w, err := srq.NewWorker(q, srq.ResultHandlerFunc[string, int](func(ctx context.Context, t *srq.Task[string]) (int, error) {
		return len(t.Value) * 100, nil // the quote, in cents
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if _, err := q.Publish(ctx, "move 3 rooms", &srq.PublishOpts{ID: "quote-7", Wait: true}); err != nil {
		panic(err)
	}
	// The worker runs the task meanwhile: here RunOnce in a goroutine; a service runs Run.
	ran := make(chan error)
	go func() {
		_, err := w.RunOnce(ctx)
		ran <- err
	}()
	// Elsewhere, with the id alone: a web handler waiting for the quote, say.
	cents, err := srq.WaitResult[int](ctx, q, "quote-7")
	fmt.Println("quote-7:", cents, err)
	if err := <-ran; err != nil {
		panic(err)
	}
	// The task has ended: a second wait returns at once.
	cents, err = srq.WaitResult[int](ctx, q, "quote-7")
	fmt.Println("quote-7 again:", cents, err)

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// quote-7: 1200 <nil>
	// quote-7 again: 1200 <nil>
}
