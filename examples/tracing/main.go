// Command tracing shows one OpenTelemetry trace through srq. A checkout request publishes an
// order, whose handler publishes an e-mail task to another queue; the same request publishes a
// flow of four steps over both queues: charge, then invoice and pack at once, then ship once both
// are done. The spans go to the stdout exporter; a summary at the end shows they share one trace,
// with the flow's step spans linked to the steps they wait for. No propagator is configured:
// the middleware then carries the trace context as W3C Trace Context. It runs on an embedded
// Redis unless REDIS_URL names a real one; interrupted (Ctrl-C, SIGTERM), it stops its workers and
// deletes its queues first.
//
//	go run ./examples/tracing
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/middleware"
)

func main() {
	// Ctrl-C (SIGINT) or SIGTERM ends ctx: run stops its workers, deletes what it made and returns,
	// and the program exits 0. A second signal stops it at once, as the default handling does.
	sig, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	context.AfterFunc(sig, stopSignals)
	ctx, cancel := context.WithTimeout(sig, time.Minute)
	defer cancel()
	client, where, stop, err := devredis.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Fprintln(os.Stderr, "redis:", where)
	exporter, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Fatal(err)
	}
	spans, err := run(ctx, client, exporter)
	if sig.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Fprintln(os.Stderr, "interrupted: stopped and cleaned up")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	traces := map[string]bool{}
	for _, s := range spans {
		traces[s.SpanContext().TraceID().String()] = true
		fmt.Fprintf(os.Stderr, "span %-28s kind %-8s links %d trace %s\n", s.Name(), s.SpanKind(), len(s.Links()), s.SpanContext().TraceID())
	}
	fmt.Fprintf(os.Stderr, "summary: %d spans in %d trace(s)\n", len(spans), len(traces))
}

// run publishes and handles the checkout's tasks and flow, exporting the spans to exporter, and
// returns them once every handler is done.
func run(ctx context.Context, client redis.UniversalClient, exporter sdktrace.SpanExporter) (_ []sdktrace.ReadOnlySpan, err error) {
	recorder := tracetest.NewSpanRecorder() // keeps the spans for the summary
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSpanProcessor(recorder))
	otelCfg := middleware.OTelConfig{TracerProvider: tp} // the global propagator, or W3C Trace Context while none is set

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
			// Its workers have stopped by then, and left the queue's consumers.
			_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, name, nil)
			err = errors.Join(err, derr)
		}
	}()
	orders, err := newQueue("orders")
	if err != nil {
		return nil, err
	}
	emails, err := newQueue("emails")
	if err != nil {
		return nil, err
	}

	done := make(chan string, 5) // the e-mail and the four flow steps
	cfg := srq.WorkerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Middleware: []srq.Middleware{middleware.Tracing(otelCfg)}}
	orderWorker, err := srq.NewWorker(orders, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Step() != "" { // a step of the flow
			done <- t.Step()
			return nil
		}
		// Publishing with the handler's ctx continues the trace into the next queue.
		_, err := emails.Publish(ctx, "receipt for "+t.Value, &srq.PublishOpts{Partition: "customer-7", Ordered: true})
		return err
	}), cfg)
	if err != nil {
		return nil, err
	}
	emailWorker, err := srq.NewWorker(emails, srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		if t.Step() != "" {
			done <- t.Step()
		} else {
			done <- "sent " + t.Value
		}
		return nil
	}), cfg)
	if err != nil {
		return nil, err
	}
	// The workers run until stopWorkers; every return waits for them to end, gracefully: Run
	// returns once its handlers are done and its acks are written.
	runCtx, stopWorkers := context.WithCancel(ctx)
	var workers errgroup.Group
	workers.Go(func() error { return orderWorker.Run(runCtx) })
	workers.Go(func() error { return emailWorker.Run(runCtx) })
	defer func() {
		stopWorkers()
		err = errors.Join(err, workers.Wait())
	}()

	request, checkout := tp.Tracer("shop").Start(ctx, "checkout")
	if _, err := orders.Publish(request, "order 1001", &srq.PublishOpts{Partition: "customer-7", Ordered: true}); err != nil {
		return nil, err
	}
	charge := orders.Step("charge", "order 1001", nil)
	invoice := emails.Step("invoice", "order 1001", nil).After(charge)
	pack := orders.Step("pack", "order 1001", nil).After(charge)
	ship := orders.Step("ship", "order 1001", nil).After(invoice, pack)
	if _, err := srq.PublishFlow(request, &srq.Flow{Steps: []*srq.Step{charge, invoice, pack, ship},
		Keep:       time.Minute, // the flow's record outlives it by a minute only: this is an example
		Middleware: []srq.FlowMiddleware{middleware.TracingFlow(otelCfg)}}); err != nil {
		return nil, err
	}
	checkout.End()
	for range 5 {
		select {
		case v := <-done:
			fmt.Fprintln(os.Stderr, "done:", v)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stopWorkers()
	if err := workers.Wait(); err != nil {
		return nil, err
	}
	if err := tp.Shutdown(ctx); err != nil {
		return nil, err
	}
	return recorder.Ended(), nil
}
