package middleware_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

type otelKit struct {
	client *redis.Client
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	cfg    middleware.OTelConfig
	tp     *sdktrace.TracerProvider
}

func newOTelKit(t *testing.T) *otelKit {
	k := &otelKit{client: redistest.Client(t), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	k.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	t.Cleanup(func() { _ = k.tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	k.cfg = middleware.OTelConfig{TracerProvider: k.tp, MeterProvider: mp, Propagator: propagation.TraceContext{}}
	return k
}

// queue returns a queue instrumented for producing.
func (k *otelKit) queue(t *testing.T, name string) *srq.Queue[string] {
	t.Helper()
	pubMetrics, err := middleware.MetricsPublish(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := srq.NewQueue[string](k.client, srq.QueueConfig{Name: name,
		PublishMiddleware: []srq.PublishMiddleware{middleware.TracingPublish(k.cfg), pubMetrics}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// work runs h over q with the recommended middleware until ctx ends.
func (k *otelKit) work(t *testing.T, ctx context.Context, q *srq.Queue[string], h srq.HandlerFunc[string]) {
	t.Helper()
	m, err := middleware.Metrics(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	constant := func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{
		middleware.Tracing(k.cfg), m, middleware.Retry(middleware.RetryConfig{Policy: constant}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// TestTracingWorkflowIsOneTrace: A → B → C on three queues and partitions, B failing once on the
// way, shows as one trace: producer and consumer spans, right kinds, attributes and statuses; and
// every metric has the right value.
func TestTracingWorkflowIsOneTrace(t *testing.T) {
	t.Parallel()
	k := newOTelKit(t)
	qa, qb, qc := k.queue(t, redistest.Queue(t)+"-a"), k.queue(t, redistest.Queue(t)+"-b"), k.queue(t, redistest.Queue(t)+"-c")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)

	finished := make(chan string, 1)
	k.work(t, runCtx, qa, func(ctx context.Context, task *srq.Task[string]) error {
		_, err := qb.Publish(ctx, task.Value+"→B", &srq.PublishOpts{Partition: "pb"})
		return err
	})
	k.work(t, runCtx, qb, func(ctx context.Context, task *srq.Task[string]) error {
		if task.Attempt == 1 {
			return errors.New("B is flaky")
		}
		_, err := qc.Publish(ctx, task.Value+"→C", &srq.PublishOpts{Partition: "pc", Ordered: true})
		return err
	})
	k.work(t, runCtx, qc, func(ctx context.Context, task *srq.Task[string]) error {
		finished <- task.Value
		return nil
	})

	root, rootSpan := k.tp.Tracer("test").Start(ctx, "request")
	if _, err := qa.Publish(root, "A", &srq.PublishOpts{Partition: "pa", Ordered: true}); err != nil {
		t.Fatal(err)
	}
	rootSpan.End()
	select {
	case v := <-finished:
		if v != "A→B→C" {
			t.Fatalf("C got %q", v)
		}
	case <-ctx.Done():
		t.Fatal("the workflow did not finish")
	}
	stop()
	// Wait for the spans of C's delivery to end: Run returns (t.Cleanup) after, but spans are
	// checked now, so poll until all eight are there.
	var spans []sdktrace.ReadOnlySpan
	waitUntil(t, func() bool { spans = k.spans.Ended(); return len(spans) >= 8 })

	trace0 := rootSpan.SpanContext().TraceID()
	count := map[string]int{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != trace0 {
			t.Errorf("span %q is in trace %s, not the request's %s", s.Name(), s.SpanContext().TraceID(), trace0)
		}
		count[s.Name()]++
		attrs := attribute.NewSet(s.Attributes()...)
		switch s.Name() {
		case "request":
		case "send " + qa.Name(), "send " + qb.Name(), "send " + qc.Name():
			if s.SpanKind() != trace.SpanKindProducer {
				t.Errorf("%s: kind %v", s.Name(), s.SpanKind())
			}
			if v, _ := attrs.Value("messaging.operation.type"); v.AsString() != "send" {
				t.Errorf("%s: attributes %v", s.Name(), s.Attributes())
			}
		case "process " + qa.Name(), "process " + qb.Name(), "process " + qc.Name():
			if s.SpanKind() != trace.SpanKindConsumer || !s.Parent().IsValid() {
				t.Errorf("%s: kind %v, parent %v", s.Name(), s.SpanKind(), s.Parent())
			}
			attempt, _ := attrs.Value("srq.attempt")
			part, _ := attrs.Value("messaging.destination.partition.id")
			id, _ := attrs.Value("messaging.message.id")
			out, _ := attrs.Value("srq.outcome")
			if id.AsString() == "" || part.AsString() == "" {
				t.Errorf("%s: attributes %v", s.Name(), s.Attributes())
			}
			failedB := s.Name() == "process "+qb.Name() && attempt.AsInt64() == 1
			if failedB != (s.Status().Code == codes.Error) || failedB != (out.AsString() == "retry") {
				t.Errorf("%s attempt %d: status %v, outcome %s", s.Name(), attempt.AsInt64(), s.Status(), out.AsString())
			}
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	if count["process "+qb.Name()] != 2 || count["send "+qc.Name()] != 1 || count["process "+qc.Name()] != 1 {
		t.Errorf("span counts %v", count)
	}

	// Metrics: per queue, the deliveries and their outcomes, every point with messaging.system.
	got := k.points(t, ctx)
	want := map[string]int64{
		middleware.MetricSent + " " + qa.Name(): 1, middleware.MetricSent + " " + qb.Name(): 1, middleware.MetricSent + " " + qc.Name(): 1,
		middleware.MetricConsumed + " " + qa.Name(): 1, middleware.MetricConsumed + " " + qb.Name(): 2, middleware.MetricConsumed + " " + qc.Name(): 1,
		middleware.MetricInFlight + " " + qa.Name(): 0, middleware.MetricInFlight + " " + qb.Name(): 0, middleware.MetricInFlight + " " + qc.Name(): 0,
		middleware.MetricProcessDuration + " " + qa.Name() + " done":           1,
		middleware.MetricProcessDuration + " " + qb.Name() + " retry rejected": 1,
		middleware.MetricProcessDuration + " " + qb.Name() + " done":           1,
		middleware.MetricProcessDuration + " " + qc.Name() + " done":           1,
		middleware.MetricLag + " " + qa.Name():                                 1, middleware.MetricLag + " " + qb.Name(): 2, middleware.MetricLag + " " + qc.Name(): 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
}

// points collects the metrics: "<name> <queue>[ <srq.outcome>[ <error.type>]]" → the sum's value
// or the histogram's count. Every point must have messaging.system srq, and those of the
// conventions' metrics their messaging.operation.name.
func (k *otelKit) points(t *testing.T, ctx context.Context) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	add := func(name string, attrs attribute.Set, v int64) {
		if sys, _ := attrs.Value("messaging.system"); sys.AsString() != "srq" {
			t.Errorf("%s %v: messaging.system %q", name, attrs.ToSlice(), sys.AsString())
		}
		op, hasOp := attrs.Value("messaging.operation.name")
		if strings.HasPrefix(name, "messaging.") != hasOp || (hasOp && op.AsString() != map[bool]string{true: "send", false: "process"}[name == middleware.MetricSent]) {
			t.Errorf("%s %v: messaging.operation.name %q", name, attrs.ToSlice(), op.AsString())
		}
		key := name
		for _, a := range []attribute.Key{"messaging.destination.name", "srq.outcome", "error.type"} {
			if v, ok := attrs.Value(a); ok {
				key += " " + v.AsString()
			}
		}
		out[key] += v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					add(m.Name, p.Attributes, int64(p.Count))
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func TestMetricsDeadLetterAndDepth(t *testing.T) {
	t.Parallel()
	k := newOTelKit(t)
	q := k.queue(t, redistest.Queue(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg, err := middleware.QueueDepth(k.cfg, q.Engine())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	for _, v := range []string{"bad", "later"} {
		opts := &srq.PublishOpts{}
		if v == "later" {
			opts.Delay = time.Hour
		}
		if _, err := q.Publish(ctx, v, opts); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	k.work(t, runCtx, q, func(context.Context, *srq.Task[string]) error { return srq.Permanent(errors.New("no")) })
	waitUntil(t, func() bool { st, _ := q.Engine().Stats(ctx); return st.Dead == 1 })
	stop()
	got := k.points(t, ctx)
	want := map[string]int64{
		middleware.MetricSent + " " + q.Name(): 2, middleware.MetricConsumed + " " + q.Name(): 1,
		middleware.MetricProcessDuration + " " + q.Name() + " dead permanent": 1, middleware.MetricLag + " " + q.Name(): 1,
		middleware.MetricInFlight + " " + q.Name():     0,
		middleware.MetricQueuePending + " " + q.Name(): 1, middleware.MetricQueueDead + " " + q.Name(): 1, middleware.MetricQueueLeased + " " + q.Name(): 0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
	// A duplicate publish is sent, and counted as one.
	dup := &srq.PublishOpts{ID: "dup", Delay: time.Hour}
	if _, err := q.Publish(ctx, "later", dup); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Publish(ctx, "later", dup); err != nil || !res.Duplicate {
		t.Fatalf("second publish: %+v, %v", res, err)
	}
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != middleware.MetricSent {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := p.Attributes.Value("srq.duplicate"); ok && v.AsBool() {
					dups += int(p.Value)
				}
			}
		}
	}
	if dups != 1 {
		t.Errorf("%s with srq.duplicate: %d, want 1", middleware.MetricSent, dups)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
