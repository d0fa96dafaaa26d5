package middleware_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// TestTracingWorkflowChildrenJoinTheParentsTrace: a parent that spawns three children on another
// queue (TracingPublish on both), waits for them and runs again is one trace with its children,
// under Tracing, Metrics and Retry: the children's publish is a child of the parent's handler
// span, each child's handler span a child of that publish; the parent's first delivery ends with
// the outcome wait, not an error, and its second run is in the same trace.
func TestTracingWorkflowChildrenJoinTheParentsTrace(t *testing.T) {
	t.Parallel()
	k := newOTelKit(t)
	name := redistest.Queue(t)
	orders, items := k.queue(t, name+"-orders"), k.queue(t, name+"-items")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	done := make(chan map[string]string, 1)
	k.work(t, runCtx, orders, func(ctx context.Context, task *srq.Task[string]) error {
		if _, again, err := srq.State[bool](ctx, task.Delivery); err != nil {
			return err
		} else if again {
			got, err := srq.ChildResults[string](ctx, task.Delivery)
			if err != nil {
				return err
			}
			done <- got
			return nil
		}
		kids := make([]srq.Spawned[string], 3)
		for i := range kids {
			kids[i] = srq.Spawned[string]{Name: fmt.Sprint("line-", i), Value: fmt.Sprint(task.Value, " line ", i)}
		}
		if _, err := srq.SpawnBatch(ctx, task.Delivery, items, kids); err != nil {
			return err
		}
		if err := task.SetState(true); err != nil {
			return err
		}
		return srq.WaitChildren()
	})
	k.work(t, runCtx, items, func(_ context.Context, task *srq.Task[string]) error {
		return task.SetResult("priced " + task.Value)
	})

	root, rootSpan := k.tp.Tracer("test").Start(ctx, "request")
	if _, err := orders.Publish(root, "order 7", &srq.PublishOpts{ID: "order-7"}); err != nil {
		t.Fatal(err)
	}
	rootSpan.End()
	select {
	case got := <-done:
		if len(got) != 3 || got["line-2"] != "priced order 7 line 2" {
			t.Fatalf("children's results %v", got)
		}
	case <-ctx.Done():
		t.Fatal("the parent did not complete")
	}
	stop()
	// request, send orders, two deliveries of the parent, send items, three children.
	var spans []sdktrace.ReadOnlySpan
	waitUntil(t, func() bool { spans = k.spans.Ended(); return len(spans) >= 8 })

	trace0 := rootSpan.SpanContext().TraceID()
	var parentRuns, children []sdktrace.ReadOnlySpan
	var sendItems sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() != trace0 {
			t.Errorf("span %q is in trace %s, not the request's %s", s.Name(), s.SpanContext().TraceID(), trace0)
		}
		switch s.Name() {
		case "process " + orders.Name():
			parentRuns = append(parentRuns, s)
		case "process " + items.Name():
			children = append(children, s)
		case "send " + items.Name():
			sendItems = s
		}
	}
	if len(spans) != 8 || len(parentRuns) != 2 || len(children) != 3 || sendItems == nil {
		for _, s := range spans {
			t.Logf("span %s", s.Name())
		}
		t.Fatalf("%d spans: %d parent runs, %d children, send items %v", len(spans), len(parentRuns), len(children), sendItems != nil)
	}
	outcome := func(s sdktrace.ReadOnlySpan) string {
		attrs := attribute.NewSet(s.Attributes()...)
		v, _ := attrs.Value("srq.outcome")
		return v.AsString()
	}
	var waited sdktrace.ReadOnlySpan
	var outcomes []string
	for _, s := range parentRuns {
		outcomes = append(outcomes, outcome(s))
		if outcome(s) == "wait" {
			waited = s
		}
		if s.Status().Code == codes.Error {
			t.Errorf("parent run with outcome %s has status %v", outcome(s), s.Status())
		}
	}
	if slices.Sort(outcomes); waited == nil || !slices.Equal(outcomes, []string{"done", "wait"}) {
		t.Fatalf("the parent's outcomes are %v, want done and wait", outcomes)
	}
	if sendItems.Parent().SpanID() != waited.SpanContext().SpanID() {
		t.Errorf("the children's publish is a child of %s, not of the parent's handler span %s", sendItems.Parent().SpanID(), waited.SpanContext().SpanID())
	}
	for _, c := range children {
		if c.Parent().SpanID() != sendItems.SpanContext().SpanID() {
			t.Errorf("child span %v is a child of %s, not of the children's publish", c.Attributes(), c.Parent().SpanID())
		}
	}

	// The metrics count the parent's wait as such, not as a failure.
	got := k.points(t, ctx)
	for key, want := range map[string]int64{
		middleware.MetricProcessDuration + " " + orders.Name() + " wait": 1,
		middleware.MetricProcessDuration + " " + orders.Name() + " done": 1,
		middleware.MetricProcessDuration + " " + items.Name() + " done":  3,
	} {
		if got[key] != want {
			t.Errorf("metric %s = %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
}
