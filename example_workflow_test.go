package srq_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

type Cart struct{ Items []string }

// A handler that fans out: it spawns one child per item of its cart, on another queue of another
// payload type, waits for them without holding its lease or a worker slot, and runs again, from
// the top, to add up their results. Its state tells the two runs apart.
func ExampleSpawn() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx := context.Background()

	carts, err := srq.NewQueue[Cart](client, srq.QueueConfig{Name: "carts"})
	if err != nil {
		panic(err)
	}
	items, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "items"})
	if err != nil {
		panic(err)
	}

	cw, err := srq.NewWorker(carts, srq.ResultHandlerFunc[Cart, int](func(ctx context.Context, t *srq.Task[Cart]) (int, error) {
		_, spawned, err := srq.State[bool](ctx, t.Delivery)
		if err != nil {
			return 0, err
		}
		if !spawned {
			for i, item := range t.Value.Items {
				// The child's id is "<cart id>/item-<i>": a run again spawns nothing twice.
				if _, err := srq.Spawn(ctx, t.Delivery, items, fmt.Sprint("item-", i), item, nil); err != nil {
					return 0, err
				}
			}
			if err := t.SetState(true); err != nil {
				return 0, err
			}
			return 0, srq.WaitChildren()
		}
		prices, err := srq.ChildResults[int](ctx, t.Delivery)
		total := 0
		for _, cents := range prices {
			total += cents
		}
		return total, err
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	catalog := map[string]int{"kettle": 3499, "mug": 899, "tray": 1999}
	iw, err := srq.NewWorker(items, srq.ResultHandlerFunc[string, int](func(ctx context.Context, t *srq.Task[string]) (int, error) {
		return catalog[t.Value], nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	_, err = carts.Publish(ctx, Cart{Items: []string{"kettle", "mug", "tray"}}, &srq.PublishOpts{ID: "cart-1", KeepResult: time.Hour})
	if err != nil {
		panic(err)
	}
	// Run both workers until the cart has its total.
	var total int
	for {
		if _, err := cw.RunOnce(ctx); err != nil {
			panic(err)
		}
		if _, err := iw.RunOnce(ctx); err != nil {
			panic(err)
		}
		if total, err = srq.ResultOf[int](ctx, carts, "cart-1"); err == nil {
			break
		}
	}
	for i := range 3 {
		id := fmt.Sprint("cart-1/item-", i)
		cents, err := srq.ResultOf[int](ctx, items, id)
		fmt.Println(id, cents, err)
	}
	fmt.Println("total", total)

	// Done with the queues: delete them (Force: this example's workers fetched from them just now).
	for _, name := range []string{carts.Name(), items.Name()} {
		if _, err := srq.DeleteQueue(ctx, client, name, &srq.DeleteQueueOpts{Force: true}); err != nil {
			panic(err)
		}
	}
	// Output:
	// cart-1/item-0 3499 <nil>
	// cart-1/item-1 899 <nil>
	// cart-1/item-2 1999 <nil>
	// total 6397
}
