// Package inspect is the operator's view of srq queues: sizes, counters and consumers, the
// partitions with the most or the oldest work, paused or held by a dead letter, one partition's
// due and delayed tasks, leased tasks, dead
// letters, flows (listed, and read with every step), the event stream, and the actions an operator
// takes (requeue or purge dead letters, pause or resume a partition or a whole queue, cancel a
// task). The actions write the queue's events when its workers or publishers keep a stream.
//
// Every call costs O(page size) in Redis, never a scan of the keyspace: the numbers come from
// counters and indexes the scripts keep (docs/data-model.md). A queue split into shards is read on
// every shard and the results merged.
//
//	in, err := inspect.New(client, inspect.Config{})
//	if err != nil { ... }
//	s, err := in.Stats(ctx, "emails")
//	fmt.Println(s.Pending, s.InFlight, s.Dead)
//	top, err := in.Partitions(ctx, "emails", inspect.PartitionQuery{By: inspect.ByDepth, Limit: 10})
//	f, err := in.Flow(ctx, "orders", "order-1001") // every step's state, parents, result size, error
//
// Errors wrap engine.ErrQueueNotFound (unknown queue; it matches engine.ErrNotFound too),
// engine.ErrNotFound (unknown task) and engine.ErrInvalid (bad argument, or a queue whose shard
// count stored in the registry is not a number in [1, engine.MaxShards]).
package inspect
