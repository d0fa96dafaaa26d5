package middleware

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// Metric names. Those of the OpenTelemetry messaging conventions come with the attributes the
// conventions ask for: messaging.system ("srq"), messaging.operation.name, and
// messaging.destination.name (the queue); srq.* names metrics the conventions lack. Partition
// keys are never an attribute of a metric: there may be millions of them.
const (
	// MetricSent counts the messages this process sent to Redis, duplicates (srq.duplicate=true)
	// and failed publishes (error.type) included: the convention's "attempted to send".
	MetricSent = "messaging.client.sent.messages"
	// MetricConsumed counts deliveries handed to a handler, once each, when the handler starts.
	MetricConsumed = "messaging.client.consumed.messages"
	// MetricProcessDuration is a histogram, in seconds, of the time in the handler (and the
	// middleware inside Metrics) per delivery, with srq.outcome (done, retry, snooze, wait, dead,
	// handed_back, cancelled) and, for a failed delivery (retry or dead), error.type.
	MetricProcessDuration = "messaging.process.duration"
	// MetricLag is a histogram, in seconds, of handler start minus the time the task became
	// available: how long ready work waited.
	MetricLag = "srq.queue.lag"
	// MetricInFlight is an up-down counter of handlers running now.
	MetricInFlight = "srq.in_flight"
	// MetricQueuePending, MetricQueueLeased and MetricQueueDead are QueueDepth's gauges.
	MetricQueuePending = "srq.queue.pending"
	MetricQueueLeased  = "srq.queue.in_flight"
	MetricQueueDead    = "srq.queue.dead"

	metricUnitSeconds  = "s"
	metricUnitMessages = "{message}"
	metricUnitTasks    = "{task}"
)

// Metrics records, through the OpenTelemetry metric API, for every delivery: one consumed
// message, its processing time with its outcome, its queue lag, and the handlers in flight (see
// the Metric… names). The histograms have cfg's buckets. It fails with srq.ErrInvalid for bucket
// boundaries out of order, and with the SDK's error if an instrument cannot be created.
func Metrics(cfg OTelConfig) (srq.Middleware, error) {
	durationBuckets, err := buckets("DurationBuckets", cfg.DurationBuckets)
	if err != nil {
		return nil, err
	}
	lagBuckets, err := buckets("LagBuckets", cfg.LagBuckets)
	if err != nil {
		return nil, err
	}
	m := cfg.meter()
	consumed, err1 := m.Int64Counter(MetricConsumed, metric.WithUnit(metricUnitMessages),
		metric.WithDescription("Number of messages that were delivered to the application."))
	duration, err2 := m.Float64Histogram(MetricProcessDuration, metric.WithUnit(metricUnitSeconds),
		metric.WithDescription("Duration of processing operation."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	lag, err3 := m.Float64Histogram(MetricLag, metric.WithUnit(metricUnitSeconds),
		metric.WithDescription("Handler start minus the time the task became available."), metric.WithExplicitBucketBoundaries(lagBuckets...))
	inFlight, err4 := m.Int64UpDownCounter(MetricInFlight, metric.WithUnit(metricUnitMessages),
		metric.WithDescription("Handlers running now."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			queue := keyQueue.String(d.Queue)
			attrs := metric.WithAttributeSet(attribute.NewSet(attrSystem, queue))
			start := time.Now()
			consumed.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attrSystem, opProcess, queue)))
			lag.Record(ctx, max(start.Sub(d.AvailableAt), 0).Seconds(), attrs)
			inFlight.Add(ctx, 1, attrs)
			defer inFlight.Add(ctx, -1, attrs) // also when a middleware inside panics
			err := next(ctx, d)
			out := outcome(ctx, d, err)
			kv := []attribute.KeyValue{attrSystem, opProcess, queue, keyOutcome.String(out)}
			if failed(out) {
				kv = append(kv, keyErrorType.String(errorType(err)))
			}
			duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(kv...))
			return err
		}
	}, nil
}

// The operation names of the metrics.
var (
	opProcess = keyOperationName.String("process")
	opSend    = keyOperationName.String("send")
)

// MetricsPublish counts the messages this process sends (MetricSent): those Redis refused as
// duplicates with srq.duplicate=true, those of a publish that failed with error.type. It fails
// with the SDK's error if the instrument cannot be created.
func MetricsPublish(cfg OTelConfig) (srq.PublishMiddleware, error) {
	sent, err := cfg.meter().Int64Counter(MetricSent, metric.WithUnit(metricUnitMessages),
		metric.WithDescription("Number of messages producer attempted to send to the broker."))
	if err != nil {
		return nil, err
	}
	return func(next srq.PublishFunc) srq.PublishFunc {
		return func(ctx context.Context, p *srq.Publishing) ([]srq.PublishResult, error) {
			res, err := next(ctx, p)
			queue := keyQueue.String(p.Queue)
			if err != nil {
				sent.Add(ctx, int64(len(p.Messages)), metric.WithAttributes(attrSystem, opSend, queue, keyErrorType.String(errorType(err))))
				return res, err
			}
			dup := 0
			for _, r := range res {
				if r.Duplicate {
					dup++
				}
			}
			if n := len(res) - dup; n > 0 {
				sent.Add(ctx, int64(n), metric.WithAttributes(attrSystem, opSend, queue))
			}
			if dup > 0 {
				sent.Add(ctx, int64(dup), metric.WithAttributes(attrSystem, opSend, queue, keyDuplicate.Bool(true)))
			}
			return res, err
		}
	}, nil
}

// QueueDepth reports the pending, leased and dead tasks of each queue as gauges, read with one
// Stats call per queue (no scans) whenever the metrics are collected. Unregister the returned
// registration to stop. It fails if an instrument or the callback cannot be registered.
func QueueDepth(cfg OTelConfig, queues ...*engine.Engine) (metric.Registration, error) {
	m := cfg.meter()
	pending, err1 := m.Int64ObservableGauge(MetricQueuePending, metric.WithUnit(metricUnitTasks))
	leased, err2 := m.Int64ObservableGauge(MetricQueueLeased, metric.WithUnit(metricUnitTasks))
	dead, err3 := m.Int64ObservableGauge(MetricQueueDead, metric.WithUnit(metricUnitTasks))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var errs []error
		for _, q := range queues {
			st, err := q.Stats(ctx)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			attrs := metric.WithAttributes(attrSystem, keyQueue.String(q.Config().Queue))
			o.ObserveInt64(pending, st.Pending, attrs)
			o.ObserveInt64(leased, st.InFlight, attrs)
			o.ObserveInt64(dead, st.Dead, attrs)
		}
		return errors.Join(errs...)
	}, pending, leased, dead)
}
