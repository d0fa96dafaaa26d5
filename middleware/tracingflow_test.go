package middleware_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// TestTracingFlowIsOneTrace publishes, with TracingFlow, a flow of three levels over two queues,
// with a fan-out (charge → invoice, ship) and a fan-in (invoice, ship → complete), its steps
// listed out of order and without an id, and runs it with Tracing: the flow span, every step
// span and every consumer span are one trace; each step span is a child of the flow span and
// links to its parents' step spans; each consumer span is a child of its step's span; the flow
// span carries the id PublishFlow reports, and the caller's Flow keeps its empty id.
func TestTracingFlowIsOneTrace(t *testing.T) {
	t.Parallel()
	k := newOTelKit(t)
	name := redistest.Queue(t)
	orders, shipping := k.queue(t, name+"-orders"), k.queue(t, name+"-shipping")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	completed := make(chan struct{})
	handler := func(_ context.Context, task *srq.Task[string]) error {
		if task.Step() == "complete" {
			close(completed)
		}
		return nil
	}
	k.work(t, runCtx, orders, handler)
	k.work(t, runCtx, shipping, handler)

	charge := orders.Step("charge", "order 7", nil)
	invoice := orders.Step("invoice", "order 7", nil).After(charge)
	ship := shipping.Step("ship", "order 7", nil).After(charge)
	complete := orders.Step("complete", "order 7", nil).After(invoice, ship)
	f := &srq.Flow{Steps: []*srq.Step{complete, ship, charge, invoice}, Middleware: []srq.FlowMiddleware{middleware.TracingFlow(k.cfg)}}
	res, err := srq.PublishFlow(ctx, f)
	if err != nil || res.ID == "" || res.Duplicate {
		t.Fatalf("PublishFlow: %+v, %v", res, err)
	}
	if f.ID != "" {
		t.Errorf("the caller's Flow got the id %q", f.ID)
	}
	select {
	case <-completed:
	case <-ctx.Done():
		t.Fatal("the flow did not complete")
	}
	stop()
	var spans []sdktrace.ReadOnlySpan
	waitUntil(t, func() bool { spans = k.spans.Ended(); return len(spans) >= 9 })

	str := func(s sdktrace.ReadOnlySpan, key attribute.Key) string {
		set := attribute.NewSet(s.Attributes()...)
		v, _ := set.Value(key)
		return v.AsString()
	}
	var flow sdktrace.ReadOnlySpan
	steps, consumers := map[string]sdktrace.ReadOnlySpan{}, map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		switch {
		case s.Name() == "publish flow":
			flow = s
		case s.Name() == "step "+str(s, "srq.flow.step"):
			steps[str(s, "srq.flow.step")] = s
		case s.SpanKind() == trace.SpanKindConsumer:
			consumers[str(s, "srq.flow.step")] = s
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	if flow == nil || len(steps) != 4 || len(consumers) != 4 || len(spans) != 9 {
		t.Fatalf("%d spans: flow %v, steps %v, consumers %v", len(spans), flow != nil, slices.Sorted(maps.Keys(steps)), slices.Sorted(maps.Keys(consumers)))
	}
	if flow.Parent().IsValid() || flow.SpanKind() != trace.SpanKindProducer || str(flow, "srq.flow.id") != res.ID {
		t.Errorf("flow span: parent %v, kind %v, attributes %v", flow.Parent(), flow.SpanKind(), flow.Attributes())
	}
	traceID := flow.SpanContext().TraceID()
	parents := map[string][]string{"charge": nil, "invoice": {"charge"}, "ship": {"charge"}, "complete": {"invoice", "ship"}}
	for step, want := range parents {
		s, c := steps[step], consumers[step]
		if s.SpanContext().TraceID() != traceID || c.SpanContext().TraceID() != traceID {
			t.Errorf("%s: step span in trace %s, consumer span in %s, flow in %s", step, s.SpanContext().TraceID(), c.SpanContext().TraceID(), traceID)
		}
		if s.Parent().SpanID() != flow.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindProducer ||
			str(s, "messaging.message.id") != res.ID+"/"+step || str(s, "srq.flow.id") != res.ID {
			t.Errorf("%s: step span parent %v, kind %v, attributes %v", step, s.Parent(), s.SpanKind(), s.Attributes())
		}
		var linked []string
		for _, l := range s.Links() {
			for p, ps := range steps {
				if l.SpanContext.SpanID() == ps.SpanContext().SpanID() {
					linked = append(linked, p)
				}
			}
		}
		slices.Sort(linked)
		if !slices.Equal(linked, want) || len(s.Links()) != len(want) {
			t.Errorf("%s: links to %v (%d links), want %v", step, linked, len(s.Links()), want)
		}
		if c.Parent().SpanID() != s.SpanContext().SpanID() || str(c, "srq.flow.id") != res.ID {
			t.Errorf("%s: consumer span parent %v, want the step span %v; attributes %v", step, c.Parent(), s.SpanContext().SpanID(), c.Attributes())
		}
	}
}

// TestTracingFlowInvalid: a flow PublishFlow refuses (a cycle, a dependency on a step outside the
// flow, a nil step) still gets its spans, every one ended, the flow span last and with the error.
func TestTracingFlowInvalid(t *testing.T) {
	t.Parallel()
	k := newOTelKit(t)
	q := k.queue(t, redistest.Queue(t))
	ctx := context.Background()
	mw := []srq.FlowMiddleware{middleware.TracingFlow(k.cfg)}
	a, b := q.Step("a", "", nil), q.Step("b", "", nil)
	a.After(b)
	b.After(a)
	outside := q.Step("outside", "", nil)
	for name, f := range map[string]*srq.Flow{
		"cycle":   {Steps: []*srq.Step{a, b}, Middleware: mw},
		"outside": {Steps: []*srq.Step{q.Step("c", "", nil).After(outside)}, Middleware: mw},
		"nil":     {Steps: []*srq.Step{nil, q.Step("d", "", nil)}, Middleware: mw},
	} {
		before := len(k.spans.Ended())
		if _, err := srq.PublishFlow(ctx, f); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		ended := k.spans.Ended()[before:]
		if want := 1 + len(f.Steps); len(ended) != want-count(f.Steps, nil) {
			t.Errorf("%s: %d spans ended, want %d", name, len(ended), want-count(f.Steps, nil))
		}
		if last := ended[len(ended)-1]; last.Name() != "publish flow" || last.Status().Code != codes.Error {
			t.Errorf("%s: last span %q, status %v", name, last.Name(), last.Status())
		}
	}
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
