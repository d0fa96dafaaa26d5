// Package srq processes typed tasks on Redis, strictly in order per key when asked, across
// millions of keys, with one shared, bounded pool of workers.
//
// A Queue[T] publishes values of type T as tasks. Each task belongs to a partition: the tasks of
// an ordered partition (PublishOpts.Ordered, or a key that starts with "!") run one at a time, in
// order (priority, then available-at, then publish order); the tasks of any other partition run
// in parallel. Ready partitions are served round-robin, so one with a huge backlog gets no more
// turns than one with a single task.
//
// A Worker runs a Handler[T] over a queue: it fetches tasks (blocking in Redis while there are
// none), leases them, extends their leases while handlers run, recovers the tasks of crashed
// workers, and settles each task by what its handler returned: nil acks it; Reject and
// RejectWithDelay hand it back (an ordered partition keeps its order and waits the delay);
// Permanent dead-letters it; any other error is retried under the worker's RetryPolicy until the
// task has used its max attempts, then dead-lettered. Delivery is at least once: handlers must be
// idempotent, and Task.Token, a fencing token that grows with every delivery, lets them fence
// their own side effects.
//
//	q, err := srq.NewQueue[Event](redisClient, srq.QueueConfig{Name: "events"})
//	_, err = q.Publish(ctx, Event{User: "42", Kind: "signup"}, &srq.PublishOpts{Partition: "42", Ordered: true})
//
//	w, err := srq.NewWorker(q, srq.HandlerFunc[Event](func(ctx context.Context, t *srq.Task[Event]) error {
//		return handle(ctx, t.Value)
//	}), srq.WorkerConfig{Concurrency: 16})
//	err = w.Run(ctx) // until ctx ends, then a graceful shutdown
//
// Everything a task's state depends on lives in Redis and changes only through Lua scripts (see
// package engine and docs/data-model.md), each one round trip that never scans the keyspace; time
// is always the Redis server's clock.
package srq
