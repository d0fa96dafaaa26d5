package middleware

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

type metricProvider = metric.MeterProvider

func (c OTelConfig) meter() metric.Meter {
	mp := c.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(instrumentationName)
}

// Metric names, all with the attribute messaging.destination.name (the queue).
const (
	MetricPublished      = "srq.published"        // counter: tasks published (duplicates not counted)
	MetricProcessed      = "srq.processed"        // counter: deliveries handled, whatever the outcome
	MetricFailed         = "srq.failed"           // counter: deliveries whose handler returned an error (snoozes not counted)
	MetricRetried        = "srq.retried"          // counter: deliveries handed back to be tried again
	MetricDeadLettered   = "srq.dead_lettered"    // counter: deliveries that sent their task to the dead letters
	MetricDuration       = "srq.handler.duration" // histogram, seconds: handler time
	MetricLag            = "srq.queue.lag"        // histogram, seconds: handler start minus the task's available-at
	MetricInFlight       = "srq.in_flight"        // up-down counter: handlers running now
	MetricQueuePending   = "srq.queue.pending"    // gauge: tasks pending (QueueDepth)
	MetricQueueLeased    = "srq.queue.in_flight"  // gauge: tasks leased (QueueDepth)
	MetricQueueDead      = "srq.queue.dead"       // gauge: dead letters (QueueDepth)
	metricUnitSeconds    = "s"
	metricUnitTasks      = "{task}"
	metricUnitDeliveries = "{delivery}"
)

// Metrics records, for every delivery, the processed, failed, retried and dead-lettered
// counters, the handler duration and queue lag histograms, and the in-flight count, through the
// OpenTelemetry metric API. It fails if an instrument cannot be created.
func Metrics(cfg OTelConfig) (srq.Middleware, error) {
	m := cfg.meter()
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(metricUnitDeliveries))
		errs = append(errs, err)
		return c
	}
	processed := counter(MetricProcessed, "Deliveries handled, whatever the outcome.")
	failed := counter(MetricFailed, "Deliveries whose handler returned an error.")
	retried := counter(MetricRetried, "Deliveries handed back to be tried again.")
	dead := counter(MetricDeadLettered, "Deliveries that sent their task to the dead letters.")
	duration, err := m.Float64Histogram(MetricDuration, metric.WithDescription("Handler time."), metric.WithUnit(metricUnitSeconds))
	errs = append(errs, err)
	lag, err := m.Float64Histogram(MetricLag, metric.WithDescription("Handler start minus the task's available-at."), metric.WithUnit(metricUnitSeconds))
	errs = append(errs, err)
	inFlight, err := m.Int64UpDownCounter(MetricInFlight, metric.WithDescription("Handlers running now."), metric.WithUnit(metricUnitDeliveries))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			attrs := metric.WithAttributeSet(attribute.NewSet(keyQueue.String(d.Queue)))
			start := time.Now()
			lag.Record(ctx, max(start.Sub(d.AvailableAt), 0).Seconds(), attrs)
			inFlight.Add(ctx, 1, attrs)
			defer inFlight.Add(ctx, -1, attrs) // also when a middleware inside panics
			err := next(ctx, d)
			duration.Record(ctx, time.Since(start).Seconds(), attrs)
			processed.Add(ctx, 1, attrs)
			switch outcome(ctx, d, err) {
			case "retry":
				failed.Add(ctx, 1, attrs)
				retried.Add(ctx, 1, attrs)
			case "dead":
				failed.Add(ctx, 1, attrs)
				dead.Add(ctx, 1, attrs)
			case "snooze", "handed_back":
				retried.Add(ctx, 1, attrs)
			}
			return err
		}
	}, nil
}

// MetricsPublish counts published tasks (srq.published), leaving duplicates out. It fails if the
// instrument cannot be created.
func MetricsPublish(cfg OTelConfig) (srq.PublishMiddleware, error) {
	published, err := cfg.meter().Int64Counter(MetricPublished, metric.WithDescription("Tasks published, duplicates not counted."),
		metric.WithUnit(metricUnitTasks))
	if err != nil {
		return nil, err
	}
	return func(next srq.PublishFunc) srq.PublishFunc {
		return func(ctx context.Context, p *srq.Publishing) ([]srq.PublishResult, error) {
			res, err := next(ctx, p)
			n := 0
			for _, r := range res {
				if !r.Duplicate {
					n++
				}
			}
			if n > 0 {
				published.Add(ctx, int64(n), metric.WithAttributes(keyQueue.String(p.Queue)))
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
			attrs := metric.WithAttributes(keyQueue.String(q.Config().Queue))
			o.ObserveInt64(pending, st.Pending, attrs)
			o.ObserveInt64(leased, st.InFlight, attrs)
			o.ObserveInt64(dead, st.Dead, attrs)
		}
		return errors.Join(errs...)
	}, pending, leased, dead)
}
