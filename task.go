package srq

import (
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
)

// Delivery is one leased task before its payload is decoded: what middleware sees, so one
// middleware serves every payload type. Its fields are the engine's delivery (id, fencing token,
// partition, priority, attempt, max attempts, enqueued-at, available-at, payload, headers,
// crashes, last error, lease deadline) and the queue's name.
type Delivery struct {
	engine.Delivery
	Queue string

	codec     codec.Codec    // the queue's, for the result (SetResult)
	maxResult int            // the most bytes a result may have
	result    []byte         // the encoded result, acked with the task
	eng       *engine.Engine // the task's shard: a flow step reads its parents there
}

// Task is one delivery with its payload decoded into a T: what a Handler[T] gets.
type Task[T any] struct {
	Value T
	*Delivery
}
