package middleware

import (
	"context"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srqueue/srq"
)

// instrumentationName names srq's tracer and meter.
const instrumentationName = "github.com/srqueue/srq"

// OTelConfig configures the OpenTelemetry middleware (Tracing, TracingPublish, TracingFlow,
// Metrics, MetricsPublish, QueueDepth). Zero values mean the documented defaults.
type OTelConfig struct {
	// TracerProvider makes the spans. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics' instruments. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator carries a publish's trace context in the task's headers to its handler. Default:
	// the global propagator (otel.SetTextMapPropagator) once the application has set one, and
	// W3C Trace Context with W3C Baggage while it has not (otel's global propagator then carries
	// nothing, and each handler's span would start a trace of its own). The global is looked up
	// at every publish and delivery, so one set after the middleware was made applies.
	Propagator propagation.TextMapPropagator
	// DurationBuckets are the bucket boundaries, in seconds, of the processing time histogram
	// (messaging.process.duration), given to the SDK as the instrument's advice: a View of
	// the application's MeterProvider still wins. Default DefaultBuckets().
	DurationBuckets []float64
	// LagBuckets are the bucket boundaries, in seconds, of the queue lag histogram
	// (srq.queue.lag), likewise. Default DefaultBuckets().
	LagBuckets []float64
}

// DefaultBuckets returns the default bucket boundaries, in seconds, of the duration and lag
// histograms: from 1ms to 10 minutes, roughly ×2.5 apart below 10s, so that a percentile is
// told apart whether handlers take milliseconds or minutes. Each call returns a new slice.
func DefaultBuckets() []float64 {
	return []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
}

// buckets returns b, or DefaultBuckets() for none. It fails with srq.ErrInvalid unless the
// boundaries are finite and strictly increasing.
func buckets(name string, b []float64) ([]float64, error) {
	if len(b) == 0 {
		return DefaultBuckets(), nil
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) || (i > 0 && v <= b[i-1]) {
			return nil, fmt.Errorf("%w: OTelConfig.%s %v: want finite boundaries in increasing order", srq.ErrInvalid, name, b)
		}
	}
	return slices.Clone(b), nil
}

func (c OTelConfig) tracer() trace.Tracer {
	tp := c.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

func (c OTelConfig) meter() metric.Meter {
	mp := c.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(instrumentationName)
}

func (c OTelConfig) propagator() propagation.TextMapPropagator {
	if c.Propagator != nil {
		return c.Propagator
	}
	return globalOrW3C{}
}

// w3c is the propagator used while the application has set none.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// globalOrW3C is the global propagator when the application has set one, and w3c while the
// global is otel's initial one, which carries no field: a trace then still joins its handlers.
type globalOrW3C struct{}

func (globalOrW3C) get() propagation.TextMapPropagator {
	if p := otel.GetTextMapPropagator(); len(p.Fields()) > 0 {
		return p
	}
	return w3c
}

func (g globalOrW3C) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	g.get().Inject(ctx, carrier)
}

func (g globalOrW3C) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return g.get().Extract(ctx, carrier)
}

func (g globalOrW3C) Fields() []string { return g.get().Fields() }

// system is the value of the messaging.system attribute on every span and metric of this
// package. The OpenTelemetry messaging conventions list no well-known value for a queue built
// on Redis (Redis is a database there, db.system.name "redis"), and allow a custom one: srq names
// the system whose semantics (partitions, leases, retries) the spans and metrics describe, as
// OpenTelemetry's own Sidekiq instrumentation uses "sidekiq" for a queue on Redis.
const system = "srq"

// Attribute keys, after the OpenTelemetry messaging conventions; srq.* for what they lack.
var (
	attrSystem       = attribute.String("messaging.system", system)
	keyQueue         = attribute.Key("messaging.destination.name")
	keyPartition     = attribute.Key("messaging.destination.partition.id")
	keyOperation     = attribute.Key("messaging.operation.type")
	keyMessageID     = attribute.Key("messaging.message.id")
	keyBatchCount    = attribute.Key("messaging.batch.message_count")
	keyAttempt       = attribute.Key("srq.attempt")
	keyOperationName = attribute.Key("messaging.operation.name")
	keyErrorType     = attribute.Key("error.type")
	keyOutcome       = attribute.Key("srq.outcome")
	keyDuplicate     = attribute.Key("srq.duplicate")
	keyFlowID        = attribute.Key("srq.flow.id")
	keyFlowStep      = attribute.Key("srq.flow.step")
)
