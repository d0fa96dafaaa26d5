package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// Names of the gauges and counters Metrics reads from the Inspector at every scrape, each with
// the attribute messaging.destination.name (the queue). docs/metrics.md lists them with their
// Prometheus names.
const (
	MetricQueuePending             = "srq.queue.pending"              // gauge: tasks pending, due or delayed
	MetricQueueInFlight            = "srq.queue.in_flight"            // gauge: tasks under lease
	MetricQueueDead                = "srq.queue.dead"                 // gauge: dead letters
	MetricQueuePaused              = "srq.queue.paused"               // gauge: 1 when the whole queue is paused
	MetricQueueConsumers           = "srq.queue.consumers"            // gauge: consumers seen in the last hour
	MetricQueuePartitionsPending   = "srq.queue.partitions.pending"   // gauge: partitions with pending tasks
	MetricQueuePartitionsReady     = "srq.queue.partitions.ready"     // gauge: partitions that can hand out work now
	MetricQueuePartitionsScheduled = "srq.queue.partitions.scheduled" // gauge: partitions waiting for a time
	MetricQueuePartitionsBlocked   = "srq.queue.partitions.blocked"   // gauge: partitions held by a lease, a limit or a pause
	MetricQueuePartitionsPaused    = "srq.queue.partitions.paused"    // gauge: paused partitions
	MetricQueueEvents              = "srq.queue.events"               // counter: task transitions, by srq.event
	MetricQueuePartitionsHeld      = "srq.queue.partitions.held"      // gauge: ordered partitions held by a dead letter
	MetricQueueWaiting             = "srq.queue.waiting"              // gauge: flow steps waiting for their parents, and tasks parked for their children or a signal without a timeout
	MetricQueueFlowsRunning        = "srq.queue.flows.running"        // gauge: flows whose home is the queue still running
	MetricQueueFlows               = "srq.queue.flows"                // counter: flows started, completed, failed, by srq.flow.event
	MetricQueueSchedulesOverdue    = "srq.queue.schedules.overdue"    // gauge: active schedules whose next tick is past its grace
)

// The attributes of the Inspector's metrics.
const (
	attrQueue     = attribute.Key("messaging.destination.name")
	attrEvent     = attribute.Key("srq.event")
	attrFlowEvent = attribute.Key("srq.flow.event")
)

// DefaultScrapeTimeout bounds the Inspector calls of one scrape.
const DefaultScrapeTimeout = 5 * time.Second

// MetricsConfig configures NewMetrics. Zero values mean the documented defaults.
type MetricsConfig struct {
	// Registry receives the srq metrics. Default: a new registry holding only them (no Go runtime
	// or process metrics); pass your own to serve everything from one endpoint.
	Registry *prometheus.Registry
	// Queues are the queues whose depth is reported. Default: every queue the Inspector lists, read
	// again at every scrape.
	Queues []string
	// ScrapeTimeout bounds the Inspector calls of one scrape. Default DefaultScrapeTimeout.
	ScrapeTimeout time.Duration
}

// Metrics is a Prometheus endpoint for srq: an http.Handler serving, in the text exposition
// format, the OpenTelemetry instruments recorded through MeterProvider (give it to
// middleware.OTelConfig for the worker's and the publisher's metrics) and gauges of every queue's
// depth, partitions, consumers and overdue schedules read from the Inspector at each scrape, with
// one Stats and one OverdueSchedules call per queue. docs/metrics.md lists every metric.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	reg      metric.Registration
	handler  http.Handler
}

// NewMetrics builds the endpoint over in. It fails with an error wrapping engine.ErrInvalid for a
// nil inspector or a negative timeout, and with OpenTelemetry's error when the exporter or an
// instrument cannot be created or registered. A Registry another endpoint already serves the srq
// metrics from is not refused: give each endpoint a Registry of its own (docs/metrics.md).
func NewMetrics(in *inspect.Inspector, cfg MetricsConfig) (*Metrics, error) {
	if in == nil {
		return nil, fmt.Errorf("srq web: %w: nil inspector", engine.ErrInvalid)
	}
	if cfg.ScrapeTimeout < 0 {
		return nil, fmt.Errorf("srq web: %w: negative ScrapeTimeout %v", engine.ErrInvalid, cfg.ScrapeTimeout)
	}
	timeout := cmp.Or(cfg.ScrapeTimeout, DefaultScrapeTimeout)
	registry := cfg.Registry
	if registry == nil {
		registry = prometheus.NewRegistry()
	}
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("srq web: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	reg, err := registerQueueGauges(provider.Meter("github.com/srqueue/srq/web"), in, cfg.Queues, timeout)
	if err != nil {
		// NewMetrics has no caller's context to pass, and none is needed: shutting down a pull
		// reader that was never read from only marks it, so the collector registered with
		// registry serves nothing, and neither blocks nor talks to anything.
		_ = provider.Shutdown(context.Background())
		return nil, err
	}
	return &Metrics{provider: provider, reg: reg,
		handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}, nil
}

// MeterProvider is the provider whose instruments the endpoint serves: set it as
// middleware.OTelConfig.MeterProvider for middleware.Metrics and middleware.MetricsPublish. Do
// not also register middleware.QueueDepth with it: the endpoint already reports the same gauges.
func (m *Metrics) MeterProvider() metric.MeterProvider { return m.provider }

// ServeHTTP serves one scrape, with X-Content-Type-Options: nosniff: label values are queue names,
// which publishers choose, and a browser must not read the text as HTML or script.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	m.handler.ServeHTTP(w, r)
}

// Shutdown stops reading the Inspector and shuts the meter provider down; instruments recorded
// afterwards are dropped. It fails with the provider's shutdown error or ctx's.
func (m *Metrics) Shutdown(ctx context.Context) error {
	return errors.Join(m.reg.Unregister(), m.provider.Shutdown(ctx))
}

// registerQueueGauges creates the Inspector's instruments and the callback that reads them.
func registerQueueGauges(m metric.Meter, in *inspect.Inspector, queues []string, timeout time.Duration) (metric.Registration, error) {
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	pending := gauge(MetricQueuePending, "{task}", "Tasks pending, due or delayed.")
	inFlight := gauge(MetricQueueInFlight, "{task}", "Tasks under lease.")
	dead := gauge(MetricQueueDead, "{task}", "Dead letters.")
	paused := gauge(MetricQueuePaused, "", "1 when the whole queue is paused, else 0.")
	consumers := gauge(MetricQueueConsumers, "{consumer}", "Consumers seen in the last hour.")
	pPending := gauge(MetricQueuePartitionsPending, "{partition}", "Partitions holding pending tasks.")
	pReady := gauge(MetricQueuePartitionsReady, "{partition}", "Partitions that can hand out work now.")
	pScheduled := gauge(MetricQueuePartitionsScheduled, "{partition}", "Partitions whose next work is delayed.")
	pBlocked := gauge(MetricQueuePartitionsBlocked, "{partition}", "Partitions with pending tasks held by a lease, a concurrency limit or a pause.")
	pPaused := gauge(MetricQueuePartitionsPaused, "{partition}", "Paused partitions.")
	pHeld := gauge(MetricQueuePartitionsHeld, "{partition}", "Ordered partitions held by a dead letter.")
	waiting := gauge(MetricQueueWaiting, "{task}", "Flow steps waiting for their parents, and tasks parked for their children or a signal without a timeout.")
	flowsRunning := gauge(MetricQueueFlowsRunning, "{flow}", "Flows whose first step is in the queue that are still running.")
	overdue := gauge(MetricQueueSchedulesOverdue, "{schedule}",
		"Active schedules whose next tick is more than their grace in the past: no worker fires them.")
	events, err := m.Int64ObservableCounter(MetricQueueEvents, metric.WithUnit("{task}"),
		metric.WithDescription("Task transitions since the queue was created, counted in Redis over every process, by srq.event."))
	errs = append(errs, err)
	flows, err := m.Int64ObservableCounter(MetricQueueFlows, metric.WithUnit("{flow}"),
		metric.WithDescription("Flows whose first step is in the queue, counted in Redis since it was created, by srq.flow.event: started, completed, failed."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("srq web: instruments: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		names := queues
		var errs []error
		if names == nil {
			qs, err := in.Queues(ctx)
			if err != nil {
				return fmt.Errorf("srq web: metrics: %w", err)
			}
			for _, q := range qs {
				// A queue whose stored shard count is unusable (QueueInfo.Err) has no stats to
				// read: it is left out, and its error reported, as a queue whose stats fail.
				if q.Err != nil {
					errs = append(errs, fmt.Errorf("srq web: metrics of queue %q: %w", q.Name, q.Err))
					continue
				}
				names = append(names, q.Name)
			}
		}
		for _, name := range names {
			st, err := in.Stats(ctx, name)
			if err != nil {
				errs = append(errs, fmt.Errorf("srq web: metrics of queue %q: %w", name, err))
				continue
			}
			q := attrQueue.String(labelValue(name))
			attrs := metric.WithAttributeSet(attribute.NewSet(q))
			o.ObserveInt64(pending, st.Pending, attrs)
			o.ObserveInt64(inFlight, st.InFlight, attrs)
			o.ObserveInt64(dead, st.Dead, attrs)
			o.ObserveInt64(paused, boolInt(st.Paused), attrs)
			o.ObserveInt64(consumers, st.ConsumerCount, attrs)
			o.ObserveInt64(pPending, st.PendingPartitions, attrs)
			o.ObserveInt64(pReady, st.ReadyPartitions, attrs)
			o.ObserveInt64(pScheduled, st.ScheduledPartitions, attrs)
			o.ObserveInt64(pBlocked, st.BlockedPartitions, attrs)
			o.ObserveInt64(pPaused, st.PausedPartitions, attrs)
			c := st.Counters
			for _, ev := range []struct {
				name string
				n    int64
			}{
				{"published", c.Published}, {"duplicate", c.Duplicates}, {"acked", c.Acked}, {"rejected", c.Rejected},
				{"taken_back", c.TakenBack}, {"handed_back", c.HandedBack}, {"recovered", c.Recovered}, {"dead_lettered", c.DeadLettered},
				{"requeued", c.Requeued}, {"purged", c.Purged}, {"trimmed", c.Trimmed}, {"cancelled", c.Cancelled},
				{"replaced", c.Replaced}, {"dropped", c.Dropped},
			} {
				o.ObserveInt64(events, ev.n, metric.WithAttributeSet(attribute.NewSet(q, attrEvent.String(ev.name))))
			}
			o.ObserveInt64(pHeld, st.HeldPartitions, attrs)
			o.ObserveInt64(waiting, st.Waiting, attrs)
			o.ObserveInt64(flowsRunning, st.RunningFlows, attrs)
			if n, err := in.OverdueSchedules(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("srq web: metrics of queue %q: %w", name, err))
			} else {
				o.ObserveInt64(overdue, int64(n), attrs)
			}
			for _, ev := range []struct {
				name string
				n    int64
			}{{"started", c.FlowsStarted}, {"completed", c.FlowsCompleted}, {"failed", c.FlowsFailed}} {
				o.ObserveInt64(flows, ev.n, metric.WithAttributeSet(attribute.NewSet(q, attrFlowEvent.String(ev.name))))
			}
		}
		return errors.Join(errs...)
	}, pending, inFlight, dead, paused, consumers, pPending, pReady, pScheduled, pBlocked, pPaused, events,
		pHeld, waiting, flowsRunning, flows, overdue)
}

// labelValue is a queue name as a label value, with each control character (C0, DEL, C1) written
// as a \u escape: the exposition format escapes only the backslash, the double quote and the line
// feed, and a scrape read in a terminal must not carry escape sequences. A queue name may not
// hold one (engine.ValidateQueueName), but one registered by an earlier version may.
func labelValue(name string) string {
	if strings.IndexFunc(name, unicode.IsControl) < 0 {
		return name
	}
	var b strings.Builder
	for _, r := range name {
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
