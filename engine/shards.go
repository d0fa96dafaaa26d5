package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// MaxShards is the most shards one queue may be split into.
const MaxShards = 1024

// ShardSeparator joins a sharded queue's name and a shard number into the name of the shard's
// engine queue ("orders#3"). Names of queues that may be sharded must not hold it, so that no
// queue's keys can collide with another queue's shard.
const ShardSeparator = "#"

// ErrShardCount is wrapped by the error for a queue configured with a shard count other than the
// one it is registered with: tasks would be looked for in the wrong shards, so it is refused.
var ErrShardCount = errors.New("srq: shard count differs from the queue's registered shard count")

// ValidateQueueName checks the name of a queue that may be sharded: the rules of NewKeys, no
// ShardSeparator, and no control character (C0, DEL or C1, as schedule names): queue names are
// shown in terminals, pages and metric labels. It fails with ErrInvalid.
func ValidateQueueName(name string) error {
	if err := validName("queue name", name); err != nil {
		return err
	}
	if strings.Contains(name, ShardSeparator) {
		return invalidf("queue name %q holds %q, which names shards", name, ShardSeparator)
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return invalidf("queue name %q holds a control character", name)
	}
	return nil
}

// ShardQueue returns the engine queue name of shard i of queue split into n shards: queue itself
// when n is 1, else "queue#i.k". Each shard has its own hash tag, and k, the smallest number that
// does it, puts shard i's tag in the i-th of n equal ranges of the 16,384 Redis Cluster slots. A
// cluster created with its slots split evenly over M masters (as redis-cli --cluster create does)
// so gets n/M shards on each master when n is a multiple of M, instead of a random spread.
//
// An n of 0 means 1, as QueueConfig.Shards does. It panics, as an index out of range does, when
// n is outside [0, MaxShards] or i outside [0, n): no shard has such a name.
func ShardQueue(queue string, n, i int) string {
	if n = checkShard(n, i); n == 1 {
		return queue
	}
	lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n
	base := queue + ShardSeparator + strconv.Itoa(i) + "."
	// Every range holds at least clusterSlots/MaxShards = 16 slots, and CRC16 spreads the names
	// evenly: a k is found after about clusterSlots/(hi-lo) tries.
	for k := 0; ; k++ {
		name := base + strconv.Itoa(k)
		if slot := clusterSlot(name); slot >= lo && slot < hi {
			return name
		}
	}
}

// checkShard returns n, a shard count in [1, MaxShards] (0 means 1), after it checked that i is a
// shard of it; it panics otherwise.
func checkShard(n, i int) int {
	if n == 0 {
		n = 1
	}
	if n < 1 || n > MaxShards {
		panic(fmt.Sprintf("srq: shard count %d is outside [1, %d]", n, MaxShards))
	}
	if i < 0 || i >= n {
		panic(fmt.Sprintf("srq: shard %d is outside [0, %d)", i, n))
	}
	return n
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterSlot is the Redis Cluster slot of hash tag: CRC16 (XMODEM) modulo 16384.
func clusterSlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// ShardOf returns the shard, in [0, n), that partition p lives in: a stable hash (FNV-1a) of the
// key, so every task of a partition goes to one shard and keeps its order. An n of 0 means 1, as
// QueueConfig.Shards does. It panics, as rand.Intn does, when n is outside [0, MaxShards].
func ShardOf(p partition.Key, n int) int {
	if n = checkShard(n, 0); n == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(p))
	return int(h.Sum32() % uint32(n))
}

// RegistryKey is the HASH that names every registered queue of prefix, with its shard count. It
// has no hash tag of its own: it is read and written only outside scripts.
func RegistryKey(prefix string) string { return prefix + ":queues" }

// RegisterQueue records that queue, under prefix, is split into shards shards, unless it is
// registered already. It fails with an error wrapping ErrShardCount when the queue is registered
// with another count, with ErrInvalid for a nil client, a bad name or count, or an invalid count
// stored for the queue (see QueueShards), and with the context's or Redis's error.
func RegisterQueue(ctx context.Context, client redis.UniversalClient, prefix, queue string, shards int) error {
	if isNilClient(client) {
		return invalidf("nil redis client")
	}
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if err := validName("key prefix", prefix); err != nil {
		return err
	}
	if shards < 1 || shards > MaxShards {
		return invalidf("shard count %d is outside [1, %d]", shards, MaxShards)
	}
	key := RegistryKey(prefix)
	set, err := client.HSetNX(ctx, key, queue, shards).Result()
	if err != nil {
		return fmt.Errorf("srq: register queue %q: %w", queue, err)
	}
	if set {
		return nil
	}
	v, err := client.HGet(ctx, key, queue).Result()
	if err != nil {
		return fmt.Errorf("srq: register queue %q: %w", queue, err)
	}
	got, err := shardCount(prefix, queue, v)
	if err != nil {
		return err
	}
	if got != shards {
		return fmt.Errorf("%w: queue %q has %d shards, the configuration says %d; "+
			"to change it, publish to a queue of another name and drain this one", ErrShardCount, queue, got, shards)
	}
	return nil
}

// shardCount reads v, the shard count the registry of prefix holds for queue. It fails with
// ErrInvalid unless v is a number in [1, MaxShards]: no client of this package writes another,
// and reading the queue with it would find its tasks in the wrong shards, or in none.
func shardCount(prefix, queue, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n >= 1 && n <= MaxShards {
		return n, nil
	}
	shown := v
	if len(shown) > 32 {
		shown = shown[:32] + "..."
	}
	return 0, &StoredShardCountError{Queue: queue, Stored: shown, Key: RegistryKey(prefix)}
}

// StoredShardCountError is the error for a queue whose registry entry holds no usable shard count
// (written by something other than srq): no call can tell where its tasks are. It matches
// ErrInvalid. Repair the entry (HSET Key Queue n), or delete the queue with DeleteQueue's force.
type StoredShardCountError struct {
	Queue  string // the queue's name
	Stored string // what the entry holds (its first 32 bytes)
	Key    string // the registry's key
}

// Error names the queue, what its entry holds and the registry's key.
func (e *StoredShardCountError) Error() string {
	return fmt.Sprintf("%v: queue %q has an invalid shard count %q stored in %s (want a number in [1, %d])",
		ErrInvalid, e.Queue, e.Stored, e.Key, MaxShards)
}

// Is makes the error match ErrInvalid.
func (e *StoredShardCountError) Is(target error) bool { return target == ErrInvalid }

// QueueInfo names a registered queue.
type QueueInfo struct {
	Name   string
	Shards int
	// Err is set, and Shards is 0, when the shard count stored for the queue is invalid (see
	// QueueShards): it wraps ErrInvalid and says what is stored. Every call on the queue that
	// reads its shard count fails with it.
	Err error
}

// Queues returns the queues registered under prefix, sorted by name. Queues register when they
// first publish or a worker starts on them. A queue whose stored shard count is invalid is listed
// with QueueInfo.Err set, so that one corrupt entry does not hide the others; the call itself
// fails only with ErrInvalid for a nil client, and with the context's or Redis's error.
func Queues(ctx context.Context, client redis.UniversalClient, prefix string) ([]QueueInfo, error) {
	if isNilClient(client) {
		return nil, invalidf("nil redis client")
	}
	m, err := client.HGetAll(ctx, RegistryKey(prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("srq: list queues: %w", err)
	}
	qs := make([]QueueInfo, 0, len(m))
	for name, v := range m {
		n, err := shardCount(prefix, name, v)
		qs = append(qs, QueueInfo{Name: name, Shards: n, Err: err})
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	return qs, nil
}

// QueueShards returns the shard count queue is registered with under prefix. It fails with
// ErrQueueNotFound (which matches ErrNotFound) when the queue is not registered, with ErrInvalid
// for a nil client or when the stored count is not a number in [1, MaxShards], and with the
// context's or Redis's error.
func QueueShards(ctx context.Context, client redis.UniversalClient, prefix, queue string) (int, error) {
	if isNilClient(client) {
		return 0, invalidf("nil redis client")
	}
	v, err := client.HGet(ctx, RegistryKey(prefix), queue).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, fmt.Errorf("%w: %q is not registered under prefix %q", ErrQueueNotFound, queue, prefix)
	case err != nil:
		return 0, fmt.Errorf("srq: look up queue %q: %w", queue, err)
	}
	return shardCount(prefix, queue, v)
}
