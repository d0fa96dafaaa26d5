package srq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// TestPublishMiddlewareRefused: NewQueue refuses a nil publish middleware, and one that returns a
// nil PublishFunc, which would otherwise panic at the first publish.
func TestPublishMiddlewareRefused(t *testing.T) {
	t.Parallel()
	_, c := newQueue[int](t, srq.QueueConfig{})
	for name, mw := range map[string]srq.PublishMiddleware{
		"nil":                nil,
		"returns a nil func": func(srq.PublishFunc) srq.PublishFunc { return nil },
	} {
		_, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "q", PublishMiddleware: []srq.PublishMiddleware{mw}})
		if !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestPublishMiddlewareWithoutResults: a publish middleware that returns no results and no error
// makes Publish and PublishBatch fail, instead of Publish indexing past the results.
func TestPublishMiddlewareWithoutResults(t *testing.T) {
	t.Parallel()
	q, c := newQueue[int](t, srq.QueueConfig{})
	swallow := func(srq.PublishFunc) srq.PublishFunc {
		return func(context.Context, *srq.Publishing) ([]srq.PublishResult, error) { return nil, nil }
	}
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: q.Name(), PublishMiddleware: []srq.PublishMiddleware{swallow}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(testCtx(t), 1, nil); err == nil {
		t.Fatal("Publish through a middleware that returned no results: no error")
	}
	if _, err := q.PublishBatch(testCtx(t), []srq.Message[int]{{Value: 1}, {Value: 2}}); err == nil {
		t.Fatal("PublishBatch through a middleware that returned no results: no error")
	}
}

// TestRunTwiceFailsWithErrRunning: a worker runs one Run or RunOnce at a time; a second fails at
// once with ErrRunning and leaves the first running.
func TestRunTwiceFailsWithErrRunning(t *testing.T) {
	t.Parallel()
	q, _ := newQueue[int](t, srq.QueueConfig{})
	handled := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		handled <- struct{}{}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	defer stop()
	if _, err := q.Publish(testCtx(t), 1, nil); err != nil {
		t.Fatal(err)
	}
	<-handled // Run is running
	if _, err := w.RunOnce(testCtx(t)); !errors.Is(err, srq.ErrRunning) {
		t.Fatalf("RunOnce while Run runs: %v, want ErrRunning", err)
	}
	if err := w.Run(testCtx(t)); !errors.Is(err, srq.ErrRunning) {
		t.Fatalf("a second Run: %v, want ErrRunning", err)
	}
}

// TestZeroQueueAndWorker: a Queue or Worker not made by its constructor fails with ErrInvalid
// instead of panicking on its nil fields, and a zero Queue has no engines.
func TestZeroQueueAndWorker(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
	for name, q := range map[string]*srq.Queue[int]{"nil": nil, "zero": {}} {
		if _, err := q.Publish(ctx, 1, nil); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Publish on a %s Queue: %v, want ErrInvalid", name, err)
		}
		if _, err := q.PublishBatch(ctx, []srq.Message[int]{{Value: 1}}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("PublishBatch on a %s Queue: %v, want ErrInvalid", name, err)
		}
		if _, err := q.Stats(ctx); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Stats of a %s Queue: %v, want ErrInvalid", name, err)
		}
		if q.Engine() != nil || q.Shards() != nil || q.ShardOf("p") != nil || q.Name() != "" {
			t.Errorf("a %s Queue has engines or a name", name)
		}
		if _, err := srq.NewWorker(q, h, srq.WorkerConfig{}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("NewWorker of a %s Queue: %v, want ErrInvalid", name, err)
		}
	}
	for name, w := range map[string]*srq.Worker{"nil": nil, "zero": {}} {
		if err := w.Run(ctx); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Run of a %s Worker: %v, want ErrInvalid", name, err)
		}
		if _, err := w.RunOnce(ctx); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("RunOnce of a %s Worker: %v, want ErrInvalid", name, err)
		}
	}
}

// TestQueueScripts: QueueConfig.Scripts reaches the queue's engines: with engine.ScriptsEval a
// publish runs its script with EVALSHA (or EVAL), never FCALL; an unknown mode is refused.
func TestQueueScripts(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	calls := &allCalls{names: map[string]int64{}}
	c.AddHook(calls)
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t), Scripts: engine.ScriptsEval})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(context.Background(), 1, nil); err != nil {
		t.Fatal(err)
	}
	_, names := calls.take()
	if names["evalsha"]+names["eval"] == 0 || names["fcall"] > 0 {
		t.Errorf("commands of a publish with ScriptsEval: %v", names)
	}
	if _, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "q", Scripts: "lua"}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("Scripts \"lua\": %v, want ErrInvalid", err)
	}
}
