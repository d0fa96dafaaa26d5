// Command fanout runs a dynamic workflow: the handler of an order reads the order, which has any
// number of lines, spawns one typed child per line on another queue ("lines"), waits for them
// without holding a worker slot, then adds up their results and prints a summary of the order.
// One line names a product the catalog does not have: its child fails, and the order, whose
// children are spawned with the ContinueDependents policy, reports it and totals the others. The
// order worker has a single slot, yet all three orders wait for their lines at once. It runs on
// an embedded Redis unless REDIS_URL names a real one, and ends by itself; interrupted (Ctrl-C,
// SIGTERM), it stops its workers and deletes its queues first.
//
//	go run ./examples/fanout
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

// OrderRef is the payload of the order queue: which order to handle.
type OrderRef struct{ ID string }

// Line is the payload of the lines queue: one line of an order.
type Line struct {
	SKU string
	Qty int
}

// Priced is a line's result.
type Priced struct {
	SKU   string
	Qty   int
	Cents int
}

// Summary is an order's result: its total, and the lines that could not be priced.
type Summary struct {
	Order  string
	Lines  int
	Cents  int
	Failed []string
}

// The order store and the catalog: what the handlers read. How many lines an order has is known
// only once it is read.
var (
	store = map[string][]Line{
		"1001": {{"kettle", 1}, {"mug", 4}},
		"1002": {{"teapot", 1}, {"mug", 2}, {"tea-sampler", 3}, {"strainer", 1}, {"tray", 1}},
		"1003": {{"kettle", 2}, {"espresso-machine", 1}, {"mug", 6}},
	}
	catalog = map[string]int{"kettle": 3499, "mug": 899, "teapot": 2450, "tea-sampler": 1200, "strainer": 450, "tray": 1999}
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
	err = run(ctx, client, os.Stdout)
	if sig.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Println("interrupted: stopped and cleaned up")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

// run handles three orders, writes their summaries to out, and deletes its queues.
func run(ctx context.Context, client redis.UniversalClient, out io.Writer) (err error) {
	// Names of their own, so that a run on a real Redis does not meet another's queues; they are
	// deleted at the end.
	suffix := strings.ToLower(rand.Text()[:6])
	orders, err := srq.NewQueue[OrderRef](client, srq.QueueConfig{Name: "orders-" + suffix})
	if err != nil {
		return err
	}
	lines, err := srq.NewQueue[Line](client, srq.QueueConfig{Name: "lines-" + suffix})
	if err != nil {
		return err
	}
	defer func() {
		for _, name := range []string{orders.Name(), lines.Name()} {
			// Its workers have stopped by then, and left the queue's consumers.
			_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, name, nil)
			err = errors.Join(err, derr)
		}
	}()

	// A line's handler prices it; a product the catalog does not have fails it for good.
	priceLine := srq.ResultHandlerFunc[Line, Priced](func(ctx context.Context, t *srq.Task[Line]) (Priced, error) {
		cents, ok := catalog[t.Value.SKU]
		if !ok {
			return Priced{}, srq.Permanent(fmt.Errorf("%s is not in the catalog", t.Value.SKU))
		}
		return Priced{SKU: t.Value.SKU, Qty: t.Value.Qty, Cents: cents * t.Value.Qty}, nil
	})

	// An order's handler is a state machine: it runs from the top each time, and its state says
	// where it stands. First run: read the order, spawn a child per line, wait. Next run: add up.
	handleOrder := srq.ResultHandlerFunc[OrderRef, Summary](func(ctx context.Context, t *srq.Task[OrderRef]) (Summary, error) {
		spawned, again, err := srq.State[int](ctx, t.Delivery)
		if err != nil {
			return Summary{}, err
		}
		if !again {
			order, ok := store[t.Value.ID]
			if !ok {
				return Summary{}, srq.Permanent(fmt.Errorf("no order %s", t.Value.ID))
			}
			kids := make([]srq.Spawned[Line], len(order))
			for i, l := range order {
				// Names from the order's lines: a run after a crash spawns the same ones, and
				// nothing twice. ContinueDependents: a failed line does not end the wait early.
				kids[i] = srq.Spawned[Line]{Name: fmt.Sprintf("line-%d", i+1), Value: l,
					Opts: &srq.SpawnOpts{Policy: srq.ContinueDependents}}
			}
			if _, err := srq.SpawnBatch(ctx, t.Delivery, lines, kids); err != nil {
				return Summary{}, err
			}
			if err := t.SetState(len(kids)); err != nil {
				return Summary{}, err
			}
			return Summary{}, srq.WaitChildren()
		}
		// Every line has ended: the results of those priced, an error for the others.
		priced, err := srq.ChildResults[Priced](ctx, t.Delivery)
		sum := Summary{Order: t.Value.ID, Lines: spawned}
		for _, p := range priced {
			sum.Cents += p.Cents
		}
		if err != nil {
			children, cerr := t.Children(ctx)
			if cerr != nil {
				return Summary{}, cerr
			}
			for _, c := range children {
				if c.State == "succeeded" {
					continue
				}
				// ChildResult reads one child: a *TaskFailedError says why it failed.
				var failed *srq.TaskFailedError
				if _, err := srq.ChildResult[Priced](ctx, t.Delivery, c.Name); errors.As(err, &failed) {
					sum.Failed = append(sum.Failed, fmt.Sprintf("%s (%s)", c.Name, failed.Reason))
				}
			}
		}
		return sum, nil
	})

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// One slot for orders: a waiting order holds none, so all three wait for their lines at once.
	orderWorker, err := srq.NewWorker(orders, handleOrder, srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		return err
	}
	lineWorker, err := srq.NewWorker(lines, priceLine, srq.WorkerConfig{Concurrency: 8, Logger: quiet})
	if err != nil {
		return err
	}
	// The workers run until stopWorkers; every return waits for them to end, gracefully.
	runCtx, stopWorkers := context.WithCancel(ctx)
	var workers errgroup.Group
	workers.Go(func() error { return orderWorker.Run(runCtx) })
	workers.Go(func() error { return lineWorker.Run(runCtx) })
	defer func() {
		stopWorkers()
		err = errors.Join(err, workers.Wait())
	}()

	ids := slices.Sorted(maps.Keys(store))
	for _, id := range ids {
		// Wait: keep the outcome for WaitResult below.
		if _, err := orders.Publish(ctx, OrderRef{ID: id}, &srq.PublishOpts{ID: "order-" + id, Wait: true}); err != nil {
			return err
		}
	}
	for _, id := range ids {
		sum, err := srq.WaitResult[Summary](ctx, orders, "order-"+id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "order %s: %d lines, total %d.%02d", sum.Order, sum.Lines, sum.Cents/100, sum.Cents%100)
		if len(sum.Failed) > 0 {
			fmt.Fprintf(out, ", not priced: %s", strings.Join(sum.Failed, ", "))
		}
		fmt.Fprintln(out)
	}
	return nil
}
