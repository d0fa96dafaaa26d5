package engine

import (
	"cmp"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for the zero values of Config.
const (
	DefaultPrefix             = "srq"
	DefaultDeadLetterMaxCount = 100_000
	DefaultDeadLetterMaxAge   = 30 * 24 * time.Hour
	DefaultRecoverChunk       = 500
	DefaultMaxPayloadBytes    = 4 << 20
	DefaultMaxBlock           = time.Second
	DefaultMaxMerge           = 32
	DefaultMaxResultBytes     = 1 << 20
)

// Limits on what one task may carry.
const (
	MaxIDLen       = 256      // bytes of a task id
	MaxReasonLen   = 8 << 10  // bytes of a reject or kill reason; longer ones are cut
	MaxHeaderBytes = 64 << 10 // bytes of a task's encoded headers
	MinPriority    = -1 << 31
	MaxPriority    = 1<<31 - 1
	// MaxPriorityLevels is the most priorities other than 0 that the pending tasks of one partition
	// may have: a fetch or an ack looks at the head of each, so it bounds what they cost. Publish
	// refuses a batch that would pass it, and Requeue a dead letter (docs/data-model.md, section 12).
	MaxPriorityLevels = 16
	// MaxDelay is the longest delay of a publish or reject.
	MaxDelay = 100 * 365 * 24 * time.Hour
	// MaxFetch is the most tasks one Fetch, FetchWait or AckFetch may ask for, and MaxBatch the
	// most items one Publish, Reject or AckFetch may carry: a script holds Redis for as long as it
	// runs, and no call may come near the client's read timeout (a call of 10,000 tasks takes a few
	// hundred ms on a busy 2-vCPU machine). Ack, Extend, Kill, Requeue and Cancel send a larger
	// call as several of at most MaxBatch items each.
	MaxFetch = 10_000
	MaxBatch = 10_000
)

// MaxAt is the latest time a task may be published for: the end of year 9999, far below the
// 2^53 ms that Redis scores and Lua numbers keep exact.
var MaxAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// Config configures an Engine for one queue. Zero values mean the documented defaults.
type Config struct {
	// Queue names the queue. Required; at most MaxNameLen bytes; no '{' or '}'.
	Queue string
	// Prefix starts every key of the queue. Default "srq".
	Prefix string
	// DedupWindow keeps the ids of acked tasks this long, so publishing one again within the
	// window is reported as a duplicate. Default 0: an acked id may be published again at once.
	DedupWindow time.Duration
	// DeadLetterMaxCount caps the dead letters; the oldest go first. Default 100,000; negative: no cap.
	DeadLetterMaxCount int
	// DeadLetterMaxAge drops dead letters older than this. Default 30 days; negative: no cap.
	DeadLetterMaxAge time.Duration
	// CrashIsNotAttempt makes a lease that expired (a crashed or stalled consumer) not count as an
	// attempt. Default false: it counts. Crashes are counted separately either way.
	CrashIsNotAttempt bool
	// RecoverChunk is the most expired leases one Recover call looks at. Default 500.
	RecoverChunk int
	// MaxOrderedRun is the most consecutive tasks of one ordered partition a fetch leases. Default 0:
	// as many as the fetch asks for.
	MaxOrderedRun int
	// MaxPayloadBytes is the largest payload Publish accepts. Default 4 MiB.
	MaxPayloadBytes int
	// MaxBlock is the longest single wait FetchWait spends blocked in Redis before it looks at its
	// context again, so it bounds how late a cancellation is noticed. Default 1s. A wait under a
	// second is cut to half the client's ReadTimeout, so its reply comes before the read times out.
	MaxBlock time.Duration
	// ResultRetention keeps the result an Ack carries (Receipt.Result) this long, readable with
	// Outcome, for tasks that do not ask for their outcome to be kept themselves (flow steps and
	// tasks published to be waited for do). Default 0: such results are dropped.
	ResultRetention time.Duration
	// MaxResultBytes is the largest result Ack accepts. Default 1 MiB.
	MaxResultBytes int
	// Events keeps an event stream of the queue of about this many entries (Events), written in
	// the same script call as each change it reports. Default 0: none. Each event costs its call
	// an XADD.
	Events int
	// MaxMerge is the most concurrent calls the engine merges into one script call: Ack, Fetch,
	// FetchNext, FetchWait's fetches and AckFetch into one, Publish calls into another. Above 1,
	// at most two calls of each kind are in flight; calls that arrive meanwhile wait and then go
	// out together, sharing a round trip and a script's fixed cost (see merge.go for what a merged
	// call means for each caller). A stalled connection holds one of the two until the client's
	// timeouts end the call. Default 32; 1 sends every call on its own, at once.
	MaxMerge int
	// Scripts says how the engine runs its Lua scripts: ScriptsFunction (a Redis Functions library
	// loaded once per server, called with FCALL; EVALSHA where the server has no functions) or
	// ScriptsEval (EVALSHA). Default ScriptsDefault: what the SRQ_SCRIPTS environment variable
	// names, else DefaultScripts.
	Scripts ScriptMode
}

// Engine runs one queue's scripts over a go-redis client (single node, Sentinel or Cluster). It is
// safe for concurrent use. A call that changes the queue is sent at most once: when its reply is
// lost, it fails with an error wrapping ErrReplyLost (it may have run) rather than being sent again.
type Engine struct {
	client  redis.UniversalClient
	cfg     Config
	keys    Keys
	keyArgs []any  // keys.ScriptKeys(), as command arguments
	calls   merger // Ack, Fetch and AckFetch calls, merged (merge.go)
	pubs    merger // Publish calls, merged
	// shortBlockCap bounds a wait under a second in Redis (blockWoken); 0: no bound.
	shortBlockCap time.Duration
	// siblings holds the engines of other slots that flow messages and step outcomes go to (at),
	// by key base.
	siblings sync.Map
	// relayDue is signalled when a call wrote to the flow outbox (RelayDue).
	relayDue chan struct{}
	// arg is the first argument of every script call.
	arg argBaseVal
	// fn is the state of the function path (functions.go).
	fn functions
}

// argBaseVal is the first argument of every script call: the key base, followed by the event
// stream's cap when the queue keeps one (argBase), as a string and as the bytes sendOnce writes.
type argBaseVal struct {
	s string
	b []byte
}

// newEngine returns an engine for the queue whose keys are keys, with cfg filled in already.
func newEngine(client redis.UniversalClient, cfg Config, keys Keys) *Engine {
	e := &Engine{client: client, cfg: cfg, keys: keys, shortBlockCap: shortBlockCap(client), relayDue: make(chan struct{}, 1)}
	for _, k := range keys.ScriptKeys() {
		e.keyArgs = append(e.keyArgs, k)
	}
	s := argBase(keys.Base(), cfg.Events)
	e.arg = argBaseVal{s: s, b: []byte(s)}
	e.calls = merger{send: e.sendCalls, max: cfg.MaxMerge, inFlight: mergeInFlight}
	e.pubs = merger{send: e.sendPublishes, max: cfg.MaxMerge, inFlight: pubsInFlight}
	if cfg.Scripts != ScriptsFunction {
		e.fn.mode.Store(fnOff)
	}
	return e
}

// New returns an Engine for cfg.Queue over client. It talks to Redis only when called. It fails
// with ErrInvalid when the client is nil or the configuration is invalid.
func New(client redis.UniversalClient, cfg Config) (*Engine, error) {
	if isNilClient(client) {
		return nil, invalidf("nil redis client")
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.DeadLetterMaxCount = cmp.Or(cfg.DeadLetterMaxCount, DefaultDeadLetterMaxCount)
	cfg.DeadLetterMaxAge = cmp.Or(cfg.DeadLetterMaxAge, DefaultDeadLetterMaxAge)
	cfg.RecoverChunk = cmp.Or(cfg.RecoverChunk, DefaultRecoverChunk)
	cfg.MaxPayloadBytes = cmp.Or(cfg.MaxPayloadBytes, DefaultMaxPayloadBytes)
	cfg.MaxBlock = cmp.Or(cfg.MaxBlock, DefaultMaxBlock)
	cfg.MaxMerge = cmp.Or(cfg.MaxMerge, DefaultMaxMerge)
	cfg.MaxResultBytes = cmp.Or(cfg.MaxResultBytes, DefaultMaxResultBytes)
	switch {
	case cfg.DedupWindow < 0:
		return nil, invalidf("negative DedupWindow %v", cfg.DedupWindow)
	case cfg.RecoverChunk < 0:
		return nil, invalidf("negative RecoverChunk %d", cfg.RecoverChunk)
	case cfg.MaxOrderedRun < 0:
		return nil, invalidf("negative MaxOrderedRun %d", cfg.MaxOrderedRun)
	case cfg.MaxPayloadBytes < 0:
		return nil, invalidf("negative MaxPayloadBytes %d", cfg.MaxPayloadBytes)
	case cfg.ResultRetention < 0:
		return nil, invalidf("negative ResultRetention %v", cfg.ResultRetention)
	case cfg.MaxResultBytes < 0:
		return nil, invalidf("negative MaxResultBytes %d", cfg.MaxResultBytes)
	case cfg.Events < 0:
		return nil, invalidf("negative Events %d", cfg.Events)
	case cfg.MaxMerge < 0:
		return nil, invalidf("negative MaxMerge %d", cfg.MaxMerge)
	case cfg.MaxBlock < time.Millisecond:
		return nil, invalidf("MaxBlock %v is below 1ms", cfg.MaxBlock)
	}
	mode, err := resolveScripts(cfg.Scripts)
	if err != nil {
		return nil, err
	}
	cfg.Scripts = mode
	keys, err := NewKeys(cfg.Prefix, cfg.Queue)
	if err != nil {
		return nil, err
	}
	return newEngine(client, cfg, keys), nil
}

// Keys returns the names of the queue's keys.
func (e *Engine) Keys() Keys { return e.keys }

// Config returns the configuration with defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Client returns the Redis client the engine runs on.
func (e *Engine) Client() redis.UniversalClient { return e.client }

func (e *Engine) deadCaps() (count int, ageMs int64) {
	count = max(e.cfg.DeadLetterMaxCount, 0)
	ageMs = max(e.cfg.DeadLetterMaxAge.Milliseconds(), 0)
	return count, ageMs
}

// isNilClient catches a nil interface and a typed nil pointer of the go-redis client types, which
// would otherwise panic on first use.
func isNilClient(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}
