package srq_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

// Debounce a burst of publishes into one task: every edit of a document asks for a re-index, and
// the re-index runs once, with the last edit, a window after the burst ends. A throttled publish
// instead runs the first and drops the rest while its window lasts.
func ExampleDebounce() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "reindex"})
	if err != nil {
		panic(err)
	}
	debounce := &srq.PublishOpts{Debounce: &srq.Debounce{Key: "doc-7", Window: 50 * time.Millisecond}}
	for _, edit := range []string{"draft", "typo fixed", "final"} {
		res, err := q.Publish(ctx, edit, debounce)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-10s replaced %v\n", edit, res.Replaced)
	}
	throttle := &srq.PublishOpts{Debounce: &srq.Debounce{Key: "sync", Window: time.Minute, Mode: srq.Throttle}}
	for _, v := range []string{"sync 1", "sync 2"} {
		res, err := q.Publish(ctx, v, throttle)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-10s dropped %v\n", v, res.Dropped)
	}

	ran := make(chan string, 10)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		ran <- t.Value
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- w.Run(wctx) }()
	// The throttled task runs at once, the debounced one a window after the last edit.
	got := []string{<-ran, <-ran}
	slices.Sort(got)
	fmt.Printf("ran: %q\n", got)
	stop()
	if err := <-stopped; err != nil {
		panic(err)
	}

	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("published %d, replaced %d, dropped %d\n", st.Published, st.Replaced, st.Dropped)
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// draft      replaced false
	// typo fixed replaced true
	// final      replaced true
	// sync 1     dropped false
	// sync 2     dropped true
	// ran: ["final" "sync 1"]
	// published 2, replaced 2, dropped 1
}
