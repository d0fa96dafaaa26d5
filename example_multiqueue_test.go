package srq_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

type Email struct{ To string }

// One worker serves two queues of different payload types with one pool of 4 handlers; the
// emails get 3 fetches for every 1 of the thumbnails while both have work.
func ExampleNewWorkerOf() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	emails, err := srq.NewQueue[Email](client, srq.QueueConfig{Name: "emails"})
	if err != nil {
		panic(err)
	}
	thumbs, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "thumbnails"})
	if err != nil {
		panic(err)
	}
	for _, to := range []string{"ann@example.com", "bob@example.com"} {
		if _, err := emails.Publish(ctx, Email{To: to}, nil); err != nil {
			panic(err)
		}
	}
	if _, err := thumbs.Publish(ctx, "cat.png", nil); err != nil {
		panic(err)
	}

	var (
		mu   sync.Mutex
		log  []string
		wg   sync.WaitGroup
		note = func(s string) { mu.Lock(); log = append(log, s); mu.Unlock(); wg.Done() }
	)
	wg.Add(3)
	w, err := srq.NewWorkerOf(srq.WorkerConfig{Concurrency: 4, Logger: quiet},
		srq.Serve(emails, srq.HandlerFunc[Email](func(ctx context.Context, t *srq.Task[Email]) error {
			note("sent an email to " + t.Value.To)
			return nil
		}), &srq.ServeOpts{Weight: 3}),
		srq.Serve(thumbs, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
			note("resized " + t.Value)
			return nil
		}), nil),
	)
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
	slices.Sort(log)
	for _, line := range log {
		fmt.Println(line)
	}
	// Output:
	// resized cat.png
	// sent an email to ann@example.com
	// sent an email to bob@example.com
}
