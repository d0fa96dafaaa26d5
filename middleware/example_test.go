package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// exampleQueue is a queue named name on the embedded Redis.
func exampleQueue(client *redis.Client, name string, cfg srq.QueueConfig) *srq.Queue[string] {
	cfg.Name = name
	q, err := srq.NewQueue[string](client, cfg)
	if err != nil {
		panic(err)
	}
	return q
}

// runUntil runs w until finished has had n values, then stops it and waits for it to return, so
// that every middleware has finished with the last task.
func runUntil(w *srq.Worker, finished <-chan struct{}, n int) {
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	for i := 0; i < n; i++ {
		<-finished
	}
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}
}

// fastRetries retries after 10ms, so that the examples do not wait for the default backoff.
func fastRetries() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }

// Log one line per delivery: the failed first attempt (with Retry's decision, as Logging is
// outside Retry) and the second, which succeeds. The time and duration are left out here only so
// that the output is the same on every run.
func ExampleLogging() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()
	q := exampleQueue(client, "emails", srq.QueueConfig{})
	if _, err := q.Publish(ctx, "welcome", &srq.PublishOpts{ID: "welcome-ann", Partition: "ann"}); err != nil {
		panic(err)
	}

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug, // successful tasks are logged at Debug
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "took" {
				return slog.Attr{}
			}
			return a
		},
	}))
	finished := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Attempt == 1 {
			return errors.New("smtp: try again later")
		}
		finished <- struct{}{}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{
		middleware.Logging(logger), // nil would log to slog.Default()
		middleware.Retry(middleware.RetryConfig{Policy: fastRetries}),
	}})
	if err != nil {
		panic(err)
	}
	runUntil(w, finished, 1)
	// Output:
	// level=INFO msg="task handed back" queue=emails task=welcome-ann partition=ann attempt=1 retry_in=10ms err="srq: rejected, retry after 10ms: smtp: try again later"
	// level=DEBUG msg="task done" queue=emails task=welcome-ann partition=ann attempt=2
}

// Bound each attempt's handler time: a handler that honours its context gives up after the
// timeout, and Retry (outside Timeout) tries the task again.
func ExampleTimeout() {
	client, done := devredis.MustEmbedded()
	defer done()
	q := exampleQueue(client, "reports", srq.QueueConfig{})
	if _, err := q.Publish(context.Background(), "monthly", nil); err != nil {
		panic(err)
	}

	finished := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Attempt == 1 {
			<-ctx.Done() // a call that hangs, cut off by the timeout
			fmt.Printf("attempt %d: %v\n", t.Attempt, ctx.Err())
			return ctx.Err()
		}
		fmt.Printf("attempt %d: done\n", t.Attempt)
		finished <- struct{}{}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{
		middleware.Retry(middleware.RetryConfig{Policy: fastRetries}),
		middleware.Timeout(50 * time.Millisecond), // 0 would set no deadline
	}})
	if err != nil {
		panic(err)
	}
	runUntil(w, finished, 1)
	// Output:
	// attempt 1: context deadline exceeded
	// attempt 2: done
}

var errMalformed = errors.New("malformed address")

// Retry a flaky task with backoff until it succeeds, and send a task whose error is not worth
// retrying to the dead letters at once.
func ExampleRetry() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()
	q := exampleQueue(client, "emails", srq.QueueConfig{})
	if _, err := q.Publish(ctx, "flaky", nil); err != nil {
		panic(err)
	}

	finished := make(chan struct{}, 1)
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		switch {
		case t.Value == "broken":
			defer func() { finished <- struct{}{} }()
			return fmt.Errorf("send: %w", errMalformed)
		case t.Attempt < 3:
			fmt.Printf("%s: attempt %d failed\n", t.Value, t.Attempt)
			return errors.New("smtp: try again later")
		}
		fmt.Printf("%s: done on attempt %d\n", t.Value, t.Attempt)
		finished <- struct{}{}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{
		middleware.Retry(middleware.RetryConfig{
			// The default policy waits about 1s, 2s, 4s, … up to 10 minutes; fastRetries waits
			// 10ms, to keep the example short.
			Policy:    fastRetries,
			Retryable: func(err error) bool { return !errors.Is(err, errMalformed) },
		}),
	}})
	if err != nil {
		panic(err)
	}
	runUntil(w, finished, 1)

	// The broken task is published only now, so that the lines print in one order.
	if _, err := q.Publish(ctx, "broken", &srq.PublishOpts{ID: "broken"}); err != nil {
		panic(err)
	}
	runUntil(w, finished, 1)
	page, err := q.Engine().DeadLetters(ctx, 0, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println("dead letter:", page.Letters[0].ID, "-", page.Letters[0].LastError)
	// Output:
	// flaky: attempt 1 failed
	// flaky: attempt 2 failed
	// flaky: done on attempt 3
	// dead letter: broken - send: malformed address
}

// Let at most one task of the queue run per hour: of two ready tasks, one runs and the other is
// snoozed until the limit allows it, without using an attempt.
func ExampleRateLimit() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()
	q := exampleQueue(client, "exports", srq.QueueConfig{})
	var ids []string
	for _, v := range []string{"export-1", "export-2"} {
		res, err := q.Publish(ctx, v, nil)
		if err != nil {
			panic(err)
		}
		ids = append(ids, res.ID)
	}

	limit, err := middleware.RateLimit(q, middleware.RateLimitConfig{PerQueue: middleware.Rate{Limit: 1, Per: time.Hour}})
	if err != nil {
		panic(err)
	}
	var ran atomic.Int64
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
		ran.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: 2, Logger: quiet, Middleware: []srq.Middleware{limit}})
	if err != nil {
		panic(err)
	}
	// Both tasks are fetched and reach RateLimit at once; Redis lets exactly one through.
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}
	fmt.Println("ran:", ran.Load())
	for _, id := range ids {
		ti, err := q.Engine().Task(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			continue // done and acked
		} else if err != nil {
			panic(err)
		}
		fmt.Printf("waiting: %s, attempts used %d, runs in about %v\n", ti.State, ti.Attempts,
			time.Until(ti.AvailableAt).Round(time.Hour))
	}
	// Output:
	// ran: 1
	// waiting: pending, attempts used 0, runs in about 1h0m0s
}

// Trace a task from its publish to its handler: the consumer span continues the trace of the
// producer span, through the trace context the task's headers carry.
func ExampleTracing() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	// Zero fields mean the global otel providers and propagator; while the application has set no
	// propagator (otel.SetTextMapPropagator), the trace context travels as W3C Trace Context.
	cfg := middleware.OTelConfig{TracerProvider: tp}

	q := exampleQueue(client, "emails", srq.QueueConfig{PublishMiddleware: []srq.PublishMiddleware{middleware.TracingPublish(cfg)}})
	if _, err := q.Publish(ctx, "welcome", nil); err != nil {
		panic(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { return nil }),
		srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Tracing(cfg)}})
	if err != nil {
		panic(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}
	ended := spans.Ended() // in the order they ended: the publish's first
	send, process := ended[0], ended[1]
	fmt.Println(send.Name(), send.SpanKind())
	fmt.Println(process.Name(), process.SpanKind())
	fmt.Println("child of the send span:", process.Parent().SpanID() == send.SpanContext().SpanID())
	// Output:
	// send emails producer
	// process emails consumer
	// child of the send span: true
}

// Count deliveries and time them by outcome with OpenTelemetry metrics, named after the
// messaging conventions; a manual reader stands in for an exporter here.
func ExampleMetrics() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()

	q := exampleQueue(client, "emails", srq.QueueConfig{})
	for _, v := range []string{"ok", "bad"} {
		if _, err := q.Publish(ctx, v, nil); err != nil {
			panic(err)
		}
	}
	metrics, err := middleware.Metrics(middleware.OTelConfig{MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		if t.Value == "bad" {
			return srq.Permanent(errors.New("cannot parse"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{metrics}})
	if err != nil {
		panic(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					fmt.Println(m.Name, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					fmt.Print(m.Name, " count ", p.Count)
					for _, key := range []attribute.Key{"srq.outcome", "error.type"} {
						if v, ok := p.Attributes.Value(key); ok {
							fmt.Printf(" %s=%s", key, v.Emit())
						}
					}
					fmt.Println()
				}
			}
		}
	}
	// Unordered output:
	// messaging.client.consumed.messages 2
	// messaging.process.duration count 1 srq.outcome=done
	// messaging.process.duration count 1 srq.outcome=dead error.type=permanent
	// srq.queue.lag count 2
	// srq.in_flight 0
}
