package srq

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// DefaultMaxAttempts is the max attempts of a task that sets none, when QueueConfig sets none.
const DefaultMaxAttempts = 25

// QueueConfig configures a queue. Zero values mean the documented defaults.
type QueueConfig struct {
	// Name names the queue. Required; no '{', '}' or '#', and no control character (C0, DEL, C1);
	// at most 200 bytes (engine.MaxNameLen) on a queue of one shard. Each shard of a sharded queue
	// is an engine queue named engine.ShardQueue(Name, Shards, i), the name followed by "#i.k",
	// and each of those names must be at most 200 bytes too, so a sharded queue's name is
	// shorter: at most 196 bytes with Shards 2 to 4 (i and k are one digit each), and a few bytes
	// fewer with more shards, as i and k grow (engine.ShardQueue tells a name's shard names).
	// NewQueue fails with ErrInvalid for a name over its limit.
	Name string
	// Shards splits the queue over this many shards, each with its own Redis Cluster hash tag, so
	// a cluster spreads the queue's work over its masters. A partition lives in one shard (a
	// stable hash of its key), so its order holds. Default 1; at most engine.MaxShards. Every
	// producer and worker of a queue must use the same count: the first to touch Redis registers
	// it, and the others fail with ErrShardCount. See docs/scaling.md.
	Shards int
	// Prefix starts every Redis key of the queue. Default "srq".
	Prefix string
	// Codec turns values into payloads and back. Default codec.MsgPack{}. NewQueue asks a codec
	// that is a codec.TypeChecker (MsgPack and JSON are) whether it can carry the payload type.
	Codec codec.Codec
	// MaxAttempts is the max attempts of tasks published without one. Default DefaultMaxAttempts;
	// negative: no limit.
	MaxAttempts int
	// DedupWindow keeps the ids of acked tasks this long, so publishing one again within the window
	// is reported as a duplicate and does not run again. Default 0: an id is a duplicate only while
	// its task exists (pending, delayed, leased or a dead letter); once it was acked, publishing the
	// id again makes a new task, which runs again. Each task acked costs a member of a sorted set
	// (its id and a score) for the window, so memory grows with throughput × window.
	DedupWindow time.Duration
	// DeadLetterMaxCount caps the dead letters, oldest dropped first. Default 100,000; negative: no cap.
	DeadLetterMaxCount int
	// DeadLetterMaxAge drops dead letters older than this. Default 30 days; negative: no cap.
	DeadLetterMaxAge time.Duration
	// CrashIsNotAttempt makes an expired lease (a crashed or stalled worker) not count as an
	// attempt. Default false: it counts.
	CrashIsNotAttempt bool
	// MaxPayloadBytes is the largest encoded payload Publish accepts. Default 4 MiB.
	MaxPayloadBytes int
	// ResultRetention keeps the results handlers give (Delivery.SetResult, ResultHandlerFunc) this
	// long after the task is acked, readable with ResultOf. Default 0: a result is kept only for
	// a task that asks for it (PublishOpts.KeepResult or Wait, a flow step).
	ResultRetention time.Duration
	// MaxResultBytes is the largest encoded result a handler may give. Default 1 MiB.
	MaxResultBytes int
	// Events keeps an event stream of about this many entries (Queue.Events): every publish, ack,
	// retry, dead letter, cancellation, requeue and flow change is written to it in the same Redis
	// call as the change. Default 0: none. It costs each task an XADD per change (docs/benchmarks.md
	// has the figures).
	Events int
	// OnDeadLetter is what an ordered partition does when one of its tasks is dead-lettered:
	// ContinuePartition (the default) or HoldPartition. PublishOpts.OnDeadLetter overrides it.
	OnDeadLetter DeadLetterPolicy
	// PublishMiddleware wraps every publish of the queue, first outermost: tracing and metrics of
	// the producer side (package middleware).
	PublishMiddleware []PublishMiddleware
	// Scripts says how the queue runs srq's Lua scripts: engine.ScriptsFunction (a Redis Functions
	// library, loaded once per server, falling back to EVALSHA where the server refuses FUNCTION)
	// or engine.ScriptsEval (EVALSHA). Default engine.ScriptsDefault: what the SRQ_SCRIPTS
	// environment variable names, else functions. NewQueue fails with ErrInvalid for another value.
	Scripts engine.ScriptMode
}

// Publishing is one publish call as publish middleware sees it: encoded messages, before they go
// to Redis. Middleware may change the messages, such as adding headers; a message's Headers map
// may be shared with the caller, so replace it rather than write to it.
type Publishing struct {
	Queue    string
	Messages []engine.Message
}

// PublishFunc publishes; it is what publish middleware wraps. Without an error it returns one
// result per message of p, in their order.
type PublishFunc func(ctx context.Context, p *Publishing) ([]PublishResult, error)

// PublishMiddleware wraps a PublishFunc. The PublishFunc it returns must keep PublishFunc's
// contract: PublishBatch fails when it returns another number of results than messages.
type PublishMiddleware func(next PublishFunc) PublishFunc

// Queue publishes values of type T to one queue. It is safe for concurrent use. Make one with
// NewQueue: the zero Queue publishes nothing (ErrInvalid) and has no engines.
type Queue[T any] struct {
	shards      *shardSet
	codec       codec.Codec
	name        string
	maxAttempts int
	onDead      DeadLetterPolicy
	publish     PublishFunc
}

// NewQueue returns the queue cfg.Name on client (single node, Sentinel or Cluster). It does not
// talk to Redis. It fails with ErrInvalid for a nil client or an invalid configuration, and for a
// payload type T the codec says it cannot carry (codec.TypeChecker): with MsgPack and JSON, a
// struct whose fields are all unexported (or tagged "-"), which would be encoded as an empty
// object and reach the handler as a zero value.
func NewQueue[T any](client redis.UniversalClient, cfg QueueConfig) (*Queue[T], error) {
	shards, err := newShardSet(client, cfg)
	if err != nil {
		return nil, err
	}
	if !cfg.OnDeadLetter.valid() {
		return nil, fmt.Errorf("%w: unknown OnDeadLetter %d", ErrInvalid, cfg.OnDeadLetter)
	}
	c := cmp.Or[codec.Codec](cfg.Codec, codec.MsgPack{})
	if tc, ok := c.(codec.TypeChecker); ok {
		if err := tc.CheckType(reflect.TypeFor[T]()); err != nil {
			return nil, fmt.Errorf("%w: queue %q: payload type: %w", ErrInvalid, cfg.Name, err)
		}
	}
	maxAttempts := cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	if maxAttempts < 0 {
		maxAttempts = 0 // the engine's "no limit"
	}
	publish := PublishFunc(func(ctx context.Context, p *Publishing) ([]PublishResult, error) {
		return shards.publish(ctx, p.Messages)
	})
	for i := len(cfg.PublishMiddleware) - 1; i >= 0; i-- {
		if cfg.PublishMiddleware[i] == nil {
			return nil, fmt.Errorf("%w: PublishMiddleware %d is nil", ErrInvalid, i)
		}
		if publish = cfg.PublishMiddleware[i](publish); publish == nil {
			return nil, fmt.Errorf("%w: PublishMiddleware %d returned a nil PublishFunc", ErrInvalid, i)
		}
	}
	return &Queue[T]{shards: shards, codec: c, name: cfg.Name,
		maxAttempts: maxAttempts, onDead: cfg.OnDeadLetter, publish: publish}, nil
}

// Name returns the queue's name; "" for a nil Queue.
func (q *Queue[T]) Name() string {
	if q == nil {
		return ""
	}
	return q.name
}

// Engine returns the byte-level engine under the queue, for operations the typed API does not
// cover (dead letters, partition controls, stats); of a sharded queue, the first shard's (see
// Shards and ShardOf). It returns nil for a nil or zero Queue, which NewQueue never returns.
func (q *Queue[T]) Engine() *engine.Engine {
	if !q.made() {
		return nil
	}
	return q.shards.engines[0]
}

// Shards returns the engines of the queue's shards, one per shard, in shard order; nil for a nil
// or zero Queue.
func (q *Queue[T]) Shards() []*engine.Engine {
	if !q.made() {
		return nil
	}
	return append([]*engine.Engine(nil), q.shards.engines...)
}

// ShardOf returns the engine of the shard that holds partition p (see PublishOpts.Partition and
// Ordered for how a partition key is built); nil for a nil or zero Queue.
func (q *Queue[T]) ShardOf(p partition.Key) *engine.Engine {
	if !q.made() {
		return nil
	}
	return q.shards.of(p)
}

// made says whether q came from NewQueue; a nil or zero Queue did not, and has no shards to use.
func (q *Queue[T]) made() bool { return q != nil && q.shards != nil }

// PublishOpts are the per-task options of a publish. The zero value publishes to the base
// partition, now, with priority 0, a generated id and the queue's max attempts.
type PublishOpts struct {
	// ID identifies the task. Publishing an id whose task still exists (pending, delayed, leased or
	// a dead letter), or that was acked within QueueConfig.DedupWindow, is a no-op reported as
	// duplicate; with the default window of 0, an id published again after its task was acked is a
	// new task and runs again. Empty: a new, time-ordered id.
	ID string
	// Partition is the partition key, such as a user id. Empty: the base partition.
	Partition string
	// Ordered makes the partition ordered: its tasks run one at a time, in order. It prefixes the
	// key with "!", so Partition "42" with Ordered is the partition key "!42".
	Ordered bool
	// Priority orders tasks inside a partition, higher first; int32 range.
	Priority int
	// Delay makes the task available this long after Redis receives it. Not with At.
	Delay time.Duration
	// At makes the task available at this time. Not with Delay.
	At time.Time
	// MaxAttempts overrides the queue's max attempts for this task; negative: no limit.
	MaxAttempts int
	// Headers travel with the task (trace context, for example).
	Headers map[string]string
	// KeepResult keeps the task's outcome (its result, or why it failed) this long after it ends,
	// readable with ResultOf, whatever the queue's ResultRetention.
	KeepResult time.Duration
	// Wait lets callers wait for the task's end with WaitResult (PublishAndWait sets it). Its
	// outcome is kept for KeepResult or the queue's ResultRetention, and at least 10 minutes.
	Wait bool
	// OnDeadLetter overrides the queue's QueueConfig.OnDeadLetter for this task, when set.
	OnDeadLetter DeadLetterPolicy
	// Debounce, when set, debounces or throttles the publish by a key: publishes of one key
	// within a window make one task (DebounceReplace, the default mode: the last payload runs a
	// window after the last publish; Throttle: the first runs now and the others are dropped).
	// PublishResult says whether the publish added a task, replaced the payload of the key's
	// pending task (Replaced) or was dropped (Dropped). Not with ID, Delay, At or Wait (nor
	// PublishAndWait): the publish then fails with ErrInvalid. See docs/lifecycle.md.
	Debounce *Debounce
}

// Debounce debounces or throttles a publish by a key (PublishOpts.Debounce): Key (at most 512
// bytes of UTF-8, not empty), Window (1 ms to 7 days, in whole milliseconds) and Mode. A publish
// with an invalid one fails with ErrInvalid.
type Debounce = engine.Debounce

// DebounceMode says what a later publish of a debounce key does while an earlier one holds it:
// DebounceReplace or Throttle.
type DebounceMode = engine.DebounceMode

// The debounce modes.
const (
	// DebounceReplace, the zero value, debounces: the first publish of a key adds a task that
	// runs a window later; each later publish, while that task is pending (not yet taken by a
	// worker), replaces its payload and headers and moves its start to a window after itself
	// (Replaced). A publish once the task was taken by a worker, or has ended, adds a new task,
	// again a window later.
	DebounceReplace = engine.DebounceReplace
	// Throttle: the first publish of a key adds a task that runs now; later publishes are dropped
	// (Dropped) within a window of it, and after that while its task has not ended (pending,
	// running, retried or waiting; a dead letter has ended).
	Throttle = engine.Throttle
)

// DeadLetterPolicy says what an ordered partition does when one of its tasks is dead-lettered.
type DeadLetterPolicy int

// The dead-letter policies. The zero value means the queue's policy (PublishOpts), or
// ContinuePartition (QueueConfig).
const (
	// ContinuePartition runs the partition's next task: the dead letter waits apart.
	ContinuePartition DeadLetterPolicy = iota + 1
	// HoldPartition holds the partition: its other tasks wait, in order, until the dead letter is
	// requeued (it goes back to its own place in the partition's order, so it runs first unless a
	// task of a higher priority or an earlier available-at came meanwhile), deleted (purged, or
	// dropped by the dead-letter caps), or the partition is resumed (inspect). For ledgers: event
	// n+1 never runs after event n failed for good. The partition shows as held, with the dead
	// task's id and error, in inspect, the CLI and the dashboard.
	HoldPartition
)

func (p DeadLetterPolicy) valid() bool { return p >= 0 && p <= HoldPartition }

// Message is one value to publish with its options, for PublishBatch.
type Message[T any] struct {
	Value T
	Opts  PublishOpts
}

// PublishResult tells what a publish did: the task's id (the generated one when none was given),
// and whether it was a duplicate that changed nothing. A debounced publish (PublishOpts.Debounce)
// that added no task says Replaced or Dropped, and its ID is then the id of its key's task.
type PublishResult = engine.PublishResult

// Publish encodes v and publishes it as one task. Publishes of one Queue from several goroutines
// that meet go to Redis as one script call (group commit), each getting its own result. A publish
// with an id (PublishOpts.ID) whose task still exists, or was acked within
// QueueConfig.DedupWindow, changes nothing and reports Duplicate; without a window, a task already
// acked is forgotten, and its id publishes a new task. It fails
// with ErrInvalid for invalid options or an oversized payload, and with the codec's error when v
// cannot be encoded, or for a nil or zero Queue; nothing is written then. It fails with ctx's error when ctx ends before the
// call is sent, nothing written, and with Redis's or ctx's error during the call, after which the
// task may or may not exist.
func (q *Queue[T]) Publish(ctx context.Context, v T, opts *PublishOpts) (PublishResult, error) {
	var o PublishOpts
	if opts != nil {
		o = *opts
	}
	res, err := q.PublishBatch(ctx, []Message[T]{{Value: v, Opts: o}})
	if err != nil {
		return PublishResult{}, err
	}
	return res[0], nil
}

// PublishBatch publishes msgs in one round trip (one per shard they go to) and reports per message
// what happened. When any message is invalid (ErrInvalid) or cannot be encoded, it fails and writes
// nothing. It fails with ctx's error when ctx ends before the call is sent; with an error wrapping
// ErrShardCount when the queue is registered with another shard count, and ErrInvalid when the
// count stored for it is unusable (engine.QueueShards); with Redis's or ctx's error during the
// call; and when a PublishMiddleware returns another number of results than messages. After the
// last two the messages may or may not exist: messages published with an id of their own
// (PublishOpts.ID) can be published again, and those that exist are reported as duplicates. A nil
// or zero Queue fails with ErrInvalid.
func (q *Queue[T]) PublishBatch(ctx context.Context, msgs []Message[T]) ([]PublishResult, error) {
	if !q.made() {
		return nil, errNotMade
	}
	ems, err := q.messages(msgs)
	if err != nil {
		return nil, err
	}
	res, err := q.publish(ctx, &Publishing{Queue: q.name, Messages: ems})
	if err == nil && len(res) != len(msgs) {
		// A publish middleware broke its contract; Publish would index past the results.
		return nil, fmt.Errorf("srq: publish returned %d results for %d messages (a PublishMiddleware?)", len(res), len(msgs))
	}
	return res, err
}

// messages encodes msgs into the engine's messages.
func (q *Queue[T]) messages(msgs []Message[T]) ([]engine.Message, error) {
	ems := make([]engine.Message, len(msgs))
	for i, m := range msgs {
		if !m.Opts.OnDeadLetter.valid() {
			return nil, fmt.Errorf("%w: message %d: unknown OnDeadLetter %d", ErrInvalid, i, m.Opts.OnDeadLetter)
		}
		payload, err := q.codec.Marshal(m.Value)
		if err != nil {
			return nil, fmt.Errorf("srq: message %d: encode with %s: %w", i, q.codec.Name(), err)
		}
		key := partition.Key(m.Opts.Partition)
		if m.Opts.Ordered {
			key = partition.Ordered(m.Opts.Partition)
		}
		maxAttempts := m.Opts.MaxAttempts
		switch {
		case maxAttempts == 0:
			maxAttempts = q.maxAttempts
		case maxAttempts < 0:
			maxAttempts = 0
		}
		ems[i] = engine.Message{ID: m.Opts.ID, Partition: key, Priority: m.Opts.Priority, Delay: m.Opts.Delay,
			At: m.Opts.At, MaxAttempts: maxAttempts, Headers: m.Opts.Headers, Payload: payload,
			KeepOutcome: m.Opts.KeepResult, Wait: m.Opts.Wait, Debounce: m.Opts.Debounce,
			HoldOnDead: cmp.Or(m.Opts.OnDeadLetter, q.onDead) == HoldPartition}
	}
	return ems, nil
}
