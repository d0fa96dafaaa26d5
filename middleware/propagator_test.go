package middleware_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// traced is what publishAndProcess saw: the ended spans, the headers the handler got, and the
// baggage member "tenant" in the handler's context.
type traced struct {
	publish, process sdktrace.ReadOnlySpan
	headers          map[string]string
	tenant           string
}

// publishAndProcess publishes one task through TracingPublish(cfg) with baggage, and processes it
// through Tracing(cfg); made, if not nil, runs once both middleware are made.
func publishAndProcess(t *testing.T, newCfg func(*sdktrace.TracerProvider) middleware.OTelConfig, made func()) traced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := newCfg(tp)
	q, err := srq.NewQueue[string](redistest.Client(t), srq.QueueConfig{Name: redistest.Queue(t),
		PublishMiddleware: []srq.PublishMiddleware{middleware.TracingPublish(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	member, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	var got traced
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, task *srq.Task[string]) error {
		got.headers = task.Headers
		got.tenant = baggage.FromContext(ctx).Member("tenant").Value()
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Tracing(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	if made != nil {
		made()
	}
	if _, err := q.Publish(baggage.ContextWithBaggage(ctx, bag), "v", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans", len(ended))
	}
	got.publish, got.process = ended[0], ended[1]
	return got
}

// TestTracingJoinsWithoutPropagator: with no propagator in OTelConfig and none set globally
// (otel's global one then carries nothing), the trace context still travels, as W3C Trace
// Context with W3C Baggage: the handler's span is a child of the publish's, in one trace, and
// the handler sees the publisher's baggage.
func TestTracingJoinsWithoutPropagator(t *testing.T) {
	t.Parallel()
	got := publishAndProcess(t, func(tp *sdktrace.TracerProvider) middleware.OTelConfig {
		return middleware.OTelConfig{TracerProvider: tp}
	}, nil)
	if got.headers["traceparent"] == "" || got.headers["baggage"] == "" {
		t.Errorf("headers %v, want traceparent and baggage", got.headers)
	}
	if got.process.Parent().SpanID() != got.publish.SpanContext().SpanID() ||
		got.process.SpanContext().TraceID() != got.publish.SpanContext().TraceID() {
		t.Errorf("process span %v is no child of the publish span %v", got.process.Parent(), got.publish.SpanContext())
	}
	if got.tenant != "acme" {
		t.Errorf("baggage tenant %q in the handler", got.tenant)
	}
}

// renamed is a propagator that carries W3C Trace Context under the header "x-trace".
type renamed struct{}

func (renamed) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	h := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, h)
	c.Set("x-trace", h.Get("traceparent"))
}

func (renamed) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": c.Get("x-trace")})
}

func (renamed) Fields() []string { return []string{"x-trace"} }

// TestTracingUsesGlobalPropagator: a global propagator the application sets, even after the
// middleware was made, is the one used, in place of the W3C default. It sets the global
// propagator, so it does not run in parallel (the parallel tests of the package run after it)
// and leaves otel's empty one behind.
func TestTracingUsesGlobalPropagator(t *testing.T) {
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	got := publishAndProcess(t, func(tp *sdktrace.TracerProvider) middleware.OTelConfig {
		return middleware.OTelConfig{TracerProvider: tp}
	}, func() { otel.SetTextMapPropagator(renamed{}) })
	if got.headers["x-trace"] == "" || got.headers["traceparent"] != "" || got.headers["baggage"] != "" {
		t.Errorf("headers %v, want x-trace only", got.headers)
	}
	if got.process.Parent().SpanID() != got.publish.SpanContext().SpanID() {
		t.Errorf("process span %v is no child of the publish span %v", got.process.Parent(), got.publish.SpanContext())
	}
	if got.tenant != "" {
		t.Errorf("baggage tenant %q in the handler: the global propagator carries none", got.tenant)
	}
}
