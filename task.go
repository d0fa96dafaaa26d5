package srq

import (
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
)

// Delivery is one leased task before its payload is decoded: what middleware sees, so one
// middleware serves every payload type, and what a Task carries beside its Value. Its fields,
// those of the embedded engine.Delivery and Queue:
//
//   - ID string: the task's id (PublishOpts.ID, or the one generated at publish).
//   - Token engine.Token: the fencing token of this delivery, larger for every later delivery of
//     the task (docs/guarantees.md, "Fencing tokens").
//   - Partition partition.Key: the partition key as stored: "!bob" for PublishOpts{Partition:
//     "bob", Ordered: true}, "bob" for the unordered partition bob, "" for the base partition.
//   - Priority int: the task's priority inside its partition.
//   - Attempt int: 1 on the first delivery; MaxAttempts int: 0 for no limit.
//   - EnqueuedAt, AvailableAt time.Time: when it was published, and when it became (or becomes)
//     available to run, on the Redis server's clock.
//   - Payload []byte: the encoded value; Headers map[string]string: the publish's headers (trace
//     context travels there).
//   - Crashes int: how often a lease of the task expired; LastError string: the reason its last
//     failure gave ("lease expired" after a crash), "" if none.
//   - LeaseDeadline time.Time: when the lease this delivery was fetched with ends, on this
//     machine's clock. The worker extends the lease while the handler runs (the handler's context
//     ends when the lease is lost); this field keeps the deadline of the fetch.
//   - Queue string: the queue's name.
//
// Its methods: FlowID and Step name the flow and the step of a flow step ("" for another task),
// Parents reads its parents' states (and the function ParentResult, given t.Delivery, a parent's
// result), SetResult gives the task its result.
type Delivery struct {
	engine.Delivery
	Queue string

	codec     codec.Codec    // the queue's, for the result (SetResult)
	maxResult int            // the most bytes a result may have
	result    []byte         // the encoded result, acked with the task
	eng       *engine.Engine // the task's shard: a flow step reads its parents there

	state    []byte           // the state SetState gave it, kept by a wait (workflow.go)
	stateSet bool             // whether SetState was called
	wf       *engine.Workflow // what the task kept from its last runs, read at the first need
}

// Task is one delivery with its payload decoded into a T: what a Handler[T] gets.
type Task[T any] struct {
	Value T
	*Delivery
}
