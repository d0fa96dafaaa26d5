package engine

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/srqueue/srq/partition"
)

// MaxNameLen is the longest queue name and key prefix, in bytes.
const MaxNameLen = 200

// Keys names every Redis key of one queue. All of them start with "<prefix>:{<queue>}:", so a
// queue lives in one Redis Cluster slot. The part that varies (a task id or a partition key) always
// ends the key, after a fixed marker, so no id or partition can make two keys collide. The Lua
// scripts build the same names (lua/includes/common.lua); a test checks they agree.
type Keys struct {
	base string
}

// NewKeys returns the key names of queue under prefix. It fails with ErrInvalid when either is
// empty, too long, not valid UTF-8, or holds '{' or '}' (which would break the hash tag).
func NewKeys(prefix, queue string) (Keys, error) {
	if err := validName("queue name", queue); err != nil {
		return Keys{}, err
	}
	if err := validName("key prefix", prefix); err != nil {
		return Keys{}, err
	}
	return Keys{base: prefix + ":{" + queue + "}:"}, nil
}

func validName(what, s string) error {
	switch {
	case s == "":
		return invalidf("empty %s", what)
	case len(s) > MaxNameLen:
		return invalidf("%s is %d bytes, the limit is %d", what, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return invalidf("%s %q is not valid UTF-8", what, s)
	case strings.ContainsAny(s, "{}"):
		return invalidf("%s %q holds '{' or '}', which would break the Redis Cluster hash tag", what, s)
	}
	return nil
}

// Base is the prefix every key of the queue starts with.
func (k Keys) Base() string { return k.base }

// Ready is the ZSET of partitions that can yield work now, scored by round-robin turn.
func (k Keys) Ready() string { return k.base + "ready" }

// Sched is the ZSET of partitions whose next work is in the future, scored by due time in ms.
func (k Keys) Sched() string { return k.base + "sched" }

// Inflight is the ZSET of leased task ids, scored by lease deadline in ms.
func (k Keys) Inflight() string { return k.base + "inflight" }

// Dead is the ZSET of dead-lettered task ids, scored by time of death in ms × 1000, made unique so
// that letters dying in one millisecond keep their order.
func (k Keys) Dead() string { return k.base + "dead" }

// Stats is the HASH of counters the scripts keep.
func (k Keys) Stats() string { return k.base + "stats" }

// Seq is the counter behind publish sequence numbers and fencing tokens.
func (k Keys) Seq() string { return k.base + "seq" }

// Wake is the LIST blocked fetchers wait on.
func (k Keys) Wake() string { return k.base + "wake" }

// Dedup is the ZSET of recently acked ids, kept only with a dedup window.
func (k Keys) Dedup() string { return k.base + "dedup" }

// Ctl is the SET of partitions that have controls (a meta hash): paused, limited or blocked.
func (k Keys) Ctl() string { return k.base + "ctl" }

// Depth is the ZSET of partitions with pending tasks, scored by how many they hold.
func (k Keys) Depth() string { return k.base + "depth" }

// Heads is the ZSET of partitions with pending tasks, scored by the available-at ms of their
// earliest pending task.
func (k Keys) Heads() string { return k.base + "heads" }

// Consumers is the ZSET of consumers seen recently, scored by the ms of their last fetch or lease
// extension.
func (k Keys) Consumers() string { return k.base + "consumers" }

// QueuePause is the STRING present while the whole queue is paused; it holds the ms it was paused.
func (k Keys) QueuePause() string { return k.base + "qpause" }

// PausedPartitions is the ZSET of paused partitions, scored by the ms they were paused.
func (k Keys) PausedPartitions() string { return k.base + "ppause" }

// Leases is the HASH of the leases of leased tasks: task id → fencing token (20 digits), 't' when
// the task is in its partition's held set or 'u', then the consumer id.
func (k Keys) Leases() string { return k.base + "leases" }

// Task is the HASH holding task id's record.
func (k Keys) Task(id string) string { return k.base + "t:" + id }

// Meta is the HASH of partition p's controls (paused, concurrency limit, blocked-until).
func (k Keys) Meta(p partition.Key) string { return k.base + "m:" + string(p) }

// Levels is the ZSET of the non-zero priority levels partition p has pending tasks in; it exists
// only while p has such a task (level 0 is implicit).
func (k Keys) Levels(p partition.Key) string { return k.base + "r:" + string(p) }

// Prio is the set of partitions whose Levels set exists: those with pending tasks at a priority
// other than 0. The scripts build it from the key base rather than take it in KEYS.
func (k Keys) Prio() string { return k.base + "prio" }

// Pending is the ZSET of partition p's pending tasks of one priority, scored by available-at ms;
// members are a 20-digit sequence number followed by the task id.
func (k Keys) Pending(p partition.Key, priority int) string {
	return k.base + "q:" + strconv.Itoa(priority) + ":" + string(p)
}

// Debounce is the STRING of debounce key key (Message.Debounce): the end of its window and the id
// of its task, "<ms>,<id>", expiring DebounceKeep after the window (lua/includes/debounce.lua).
func (k Keys) Debounce(key string) string { return k.base + "db:" + key }

// Outcome is the HASH of task id's outcome, kept for a retention once it ended (see Outcome).
func (k Keys) Outcome(id string) string { return k.base + "o:" + id }

// Waiter is the LIST a caller waiting for task id blocks on; the task's end pushes its state.
func (k Keys) Waiter(id string) string { return k.base + "w:" + id }

// Outcomes is the ZSET of the ids whose outcome is kept, scored by the ms their retention ends.
func (k Keys) Outcomes() string { return k.base + "outs" }

// Held is the SET of leased task ids of partition p, kept for ordered and limited partitions.
func (k Keys) Held(p partition.Key) string { return k.base + "l:" + string(p) }

// RateLimit is the STRING holding the state (theoretical arrival time, ms) of the rate limit called
// name; it expires once that state no longer matters.
func (k Keys) RateLimit(name string) string { return k.base + "rl:" + name }

// ScriptKeys returns the KEYS every script gets: the key base, from which the scripts build the
// queue's fixed keys (lua/keys.go), and the seq key. The base is never a key that exists, so while
// a Cluster migrates the queue's slot, a call of two keys, one of them missing, is refused with
// TRYAGAIN by both nodes rather than run on either with part of the queue (a call of one key
// that does not exist would be sent on to the importing node with ASK). A new slice on each call.
func (k Keys) ScriptKeys() []string { return []string{k.base, k.Seq()} }

// fixedKeys returns the queue's fixed keys in the order the scripts build them (lua.KeySuffixes).
func (k Keys) fixedKeys() []string {
	return []string{k.Ready(), k.Sched(), k.Inflight(), k.Dead(), k.Stats(), k.Seq(), k.Wake(), k.Dedup(), k.Ctl(),
		k.Depth(), k.Heads(), k.Consumers(), k.QueuePause(), k.PausedPartitions(), k.Leases(), k.Prio()}
}
