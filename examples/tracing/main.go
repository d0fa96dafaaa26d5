// Command tracing shows one OpenTelemetry trace from a publish through two handlers: an order is
// published, its handler publishes an e-mail task to another queue, and the e-mail handler
// finishes. The spans go to the stdout exporter; a summary at the end shows they share one trace.
// It runs on an embedded Redis unless REDIS_URL names a real one.
//
//	go run ./examples/tracing
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/middleware"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, where, stop, err := devredis.Connect()
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintln(os.Stderr, "redis:", where)

	exporter, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	recorder := tracetest.NewSpanRecorder() // keeps the spans for the summary
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSpanProcessor(recorder))
	otelCfg := middleware.OTelConfig{TracerProvider: tp, Propagator: propagation.TraceContext{}}

	suffix := fmt.Sprint(time.Now().UnixNano())
	var cleanups []string
	newQueue := func(name string) (*srq.Queue[string], error) {
		q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: name + "-" + suffix,
			PublishMiddleware: []srq.PublishMiddleware{middleware.TracingPublish(otelCfg)}})
		if err == nil {
			// The example's queues go when it ends: on a real Redis they would otherwise stay registered.
			cleanups = append(cleanups, q.Name())
		}
		return q, err
	}
	defer func() {
		for _, name := range cleanups {
			_, _ = srq.DeleteQueue(context.WithoutCancel(ctx), client, name, &srq.DeleteQueueOpts{Force: true})
		}
	}()
	orders, err := newQueue("orders")
	if err != nil {
		return err
	}
	emails, err := newQueue("emails")
	if err != nil {
		return err
	}

	sent := make(chan string, 1)
	cfg := srq.WorkerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Middleware: []srq.Middleware{middleware.Tracing(otelCfg)}}
	orderWorker, err := srq.NewWorker(orders, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		// Publishing with the handler's ctx continues the trace into the next queue.
		_, err := emails.Publish(ctx, "receipt for "+t.Value, &srq.PublishOpts{Partition: "customer-7", Ordered: true})
		return err
	}), cfg)
	if err != nil {
		return err
	}
	emailWorker, err := srq.NewWorker(emails, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		sent <- t.Value
		return nil
	}), cfg)
	if err != nil {
		return err
	}
	runCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	errs := make(chan error, 2)
	go func() { errs <- orderWorker.Run(runCtx) }()
	go func() { errs <- emailWorker.Run(runCtx) }()

	if _, err := orders.Publish(ctx, "order 1001", &srq.PublishOpts{Partition: "customer-7", Ordered: true}); err != nil {
		return err
	}
	select {
	case v := <-sent:
		fmt.Fprintln(os.Stderr, "sent:", v)
	case <-ctx.Done():
		return ctx.Err()
	}
	stopWorkers()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := tp.Shutdown(ctx); err != nil {
		return err
	}

	spans := recorder.Ended()
	traces := map[string]bool{}
	for _, s := range spans {
		traces[s.SpanContext().TraceID().String()] = true
		fmt.Fprintf(os.Stderr, "span %-40s kind %-8s trace %s\n", s.Name(), s.SpanKind(), s.SpanContext().TraceID())
	}
	fmt.Fprintf(os.Stderr, "summary: %d spans in %d trace(s)\n", len(spans), len(traces))
	for _, q := range []*srq.Queue[string]{orders, emails} {
		k := q.Engine().Keys()
		if err := client.Del(ctx, k.Stats(), k.Seq(), k.Wake()).Err(); err != nil {
			return err
		}
	}
	return nil
}
