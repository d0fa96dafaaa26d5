package inspect_test

import (
	"context"
	"fmt"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// Look at a queue as an operator: its sizes, its deepest partitions, and pause the deepest one.
func ExampleInspector() {
	client, stop := devredis.MustEmbedded() // a real Redis in production
	defer stop()
	ctx := context.Background()

	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "emails"})
	if err != nil {
		panic(err)
	}
	for i, user := range []string{"ann", "ann", "ann", "bob"} {
		if _, err := q.Publish(ctx, fmt.Sprint("mail ", i), &srq.PublishOpts{Partition: user, Ordered: true}); err != nil {
			panic(err)
		}
	}

	in, err := inspect.New(client, inspect.Config{})
	if err != nil {
		panic(err)
	}
	s, err := in.Stats(ctx, "emails")
	if err != nil {
		panic(err)
	}
	fmt.Println("pending:", s.Pending, "ready partitions:", s.ReadyPartitions)

	top, err := in.Partitions(ctx, "emails", inspect.PartitionQuery{By: inspect.ByDepth, Limit: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("deepest:", top[0].Key, top[0].Pending)

	if err := in.PausePartition(ctx, "emails", partition.Ordered("ann")); err != nil {
		panic(err)
	}
	s, err = in.Stats(ctx, "emails")
	if err != nil {
		panic(err)
	}
	fmt.Println("paused partitions:", s.PausedPartitions, "ready partitions:", s.ReadyPartitions)
	// Output:
	// pending: 4 ready partitions: 2
	// deepest: !ann 3
	// paused partitions: 1 ready partitions: 1
}
