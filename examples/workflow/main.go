// Command workflow runs an order pipeline as an srq flow over two queues of different payload
// types: charge the order; then, in parallel, e-mail the customer (queue "emails"), write the
// invoice and request the goods from the warehouse (queue "orders"); then complete the order,
// reading each parent's typed result with srq.ParentResult. It prints the order queue's events as
// they happen, the flow's DAG with every step's state, the completed order, and the id of the
// OpenTelemetry trace that holds the flow's publish and every step's handler (spans kept in
// memory). It runs on an embedded Redis unless REDIS_URL names a real one, and ends by itself;
// interrupted (Ctrl-C, SIGTERM), it stops its workers and deletes its queues first.
//
//	go run ./examples/workflow
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// Order is the payload of the order queue's steps.
type Order struct {
	ID       string
	Customer string
	Cents    int
	Items    []string
}

// Email is the payload of the e-mail queue.
type Email struct {
	To, Subject string
}

// The steps' results, each read by the steps after it with its own type.
type (
	Charge  struct{ Transaction string }
	Sent    struct{ MessageID string }
	Invoice struct{ Number, Transaction string }
	Pick    struct{ Ticket string }
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
	fmt.Println("redis:", where)
	err = run(ctx, client)
	if sig.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Println("interrupted: stopped and cleaned up")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, client redis.UniversalClient) (err error) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	otelCfg := middleware.OTelConfig{TracerProvider: tp}

	// Names of their own, so that a run on a real Redis does not meet another's queues; they are
	// deleted at the end.
	suffix := strings.ToLower(rand.Text()[:6])
	orders, err := srq.NewQueue[Order](client, srq.QueueConfig{Name: "orders-" + suffix, Events: 1000})
	if err != nil {
		return err
	}
	emails, err := srq.NewQueue[Email](client, srq.QueueConfig{Name: "emails-" + suffix})
	if err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{orders.Name(), emails.Name()} {
			// Its workers have stopped by then, and left the queue's consumers.
			_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, name, nil)
			err = errors.Join(err, derr)
		}
	}()

	// The order queue's handler runs four kinds of step, each giving a typed result.
	orderHandler := srq.HandlerFunc[Order](func(ctx context.Context, t *srq.Task[Order]) error {
		o := t.Value
		switch t.Step() {
		case "charge":
			return t.SetResult(Charge{Transaction: "tx-" + o.ID})
		case "invoice":
			c, err := srq.ParentResult[Charge](ctx, t.Delivery, "charge")
			if err != nil {
				return err
			}
			return t.SetResult(Invoice{Number: "INV-" + o.ID, Transaction: c.Transaction})
		case "warehouse":
			return t.SetResult(Pick{Ticket: fmt.Sprintf("PICK-%s-%d", o.ID, len(o.Items))})
		case "complete":
			sent, err1 := srq.ParentResult[Sent](ctx, t.Delivery, "email")
			inv, err2 := srq.ParentResult[Invoice](ctx, t.Delivery, "invoice")
			pick, err3 := srq.ParentResult[Pick](ctx, t.Delivery, "warehouse")
			if err := errors.Join(err1, err2, err3); err != nil {
				return err
			}
			return t.SetResult(fmt.Sprintf("order %s complete: %s (%s), mail %s, %s", o.ID, inv.Number, inv.Transaction,
				sent.MessageID, pick.Ticket))
		}
		return srq.Permanent(fmt.Errorf("unknown step %q", t.Step()))
	})
	emailHandler := srq.ResultHandlerFunc[Email, Sent](func(ctx context.Context, t *srq.Task[Email]) (Sent, error) {
		return Sent{MessageID: fmt.Sprintf("<%s@mail.example>", strings.ReplaceAll(t.ID, "/", "."))}, nil
	})
	cfg := srq.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: []srq.Middleware{middleware.Tracing(otelCfg)}}
	orderWorker, err := srq.NewWorker(orders, orderHandler, cfg)
	if err != nil {
		return err
	}
	emailWorker, err := srq.NewWorker(emails, emailHandler, cfg)
	if err != nil {
		return err
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

	// The pipeline: charge; then email, invoice and warehouse at once; then complete.
	order := Order{ID: "1001", Customer: "ann@example.com", Cents: 4250, Items: []string{"kettle", "mug", "mug"}}
	charge := orders.Step("charge", order, nil)
	email := emails.Step("email", Email{To: order.Customer, Subject: "Your order " + order.ID}, nil).After(charge)
	invoice := orders.Step("invoice", order, nil).After(charge)
	warehouse := orders.Step("warehouse", order, nil).After(charge)
	complete := orders.Step("complete", order, nil).After(email, invoice, warehouse)
	res, err := srq.PublishFlow(ctx, &srq.Flow{ID: "order-" + order.ID, Steps: []*srq.Step{charge, email, invoice, warehouse, complete},
		Middleware: []srq.FlowMiddleware{middleware.TracingFlow(otelCfg)}})
	if err != nil {
		return err
	}

	// The order queue's events, from its oldest, until the flow ends: the flow lives with its
	// first step's queue, which writes its flow events.
	fmt.Println("events of the order queue:")
	for ev, err := range orders.Events(ctx, "0") {
		if err != nil {
			return err
		}
		fmt.Printf("  %-15s %s\n", ev.Kind, ev.ID)
		if ev.ID == res.ID && (ev.Kind == engine.EventFlowCompleted || ev.Kind == engine.EventFlowFailed) {
			break
		}
	}
	stopWorkers()
	if err := workers.Wait(); err != nil {
		return err
	}

	f, err := orders.Flow(ctx, res.ID)
	if err != nil {
		return err
	}
	printDAG(f)
	summary, err := srq.ResultOf[string](ctx, orders, res.ID+"/complete")
	if err != nil {
		return err
	}
	fmt.Println(summary)

	// The exporter keeps each span as it ends (WithSyncer); shutting it down would drop them.
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
	return printTrace(spans.GetSpans(), res.ID)
}

// printDAG prints flow f's steps by level (the longest path from a step without parents), each
// with its state, queue and parents.
func printDAG(f srq.FlowInfo) {
	fmt.Printf("flow %s: %s, %d of %d steps succeeded\n", f.ID, f.State, f.Succeeded, len(f.Steps))
	level := map[string]int{}
	var levelOf func(i int) int
	byName := map[string]int{}
	for i, s := range f.Steps {
		byName[s.Name] = i
	}
	levelOf = func(i int) int {
		s := f.Steps[i]
		if l, ok := level[s.Name]; ok {
			return l
		}
		l := 0
		for _, e := range s.After {
			l = max(l, levelOf(byName[e.Parent])+1)
		}
		level[s.Name] = l
		return l
	}
	for l := 0; ; l++ {
		found := false
		for i, s := range f.Steps {
			if levelOf(i) != l {
				continue
			}
			found = true
			var after []string
			for _, e := range s.After {
				after = append(after, e.Parent)
			}
			line := fmt.Sprintf("  %s%-10s %-10s %s", strings.Repeat("  ", l), s.Name, s.State, s.Queue)
			if len(after) > 0 {
				line += "  after " + strings.Join(after, ", ")
			}
			fmt.Println(line)
		}
		if !found {
			return
		}
	}
}

// printTrace prints the trace of flow fid's publish and how many spans it holds, by name.
func printTrace(spans tracetest.SpanStubs, fid string) error {
	var trace string
	for _, s := range spans {
		if s.Name == "publish flow" {
			trace = s.SpanContext.TraceID().String()
		}
	}
	if trace == "" {
		return fmt.Errorf("no span of the flow %s", fid)
	}
	count := map[string]int{}
	total := 0
	for _, s := range spans {
		if s.SpanContext.TraceID().String() == trace {
			count[strings.Fields(s.Name)[0]]++
			total++
		}
	}
	fmt.Printf("trace %s: %d spans (%d publish flow, %d step, %d process)\n", trace, total, count["publish"], count["step"], count["process"])
	return nil
}
