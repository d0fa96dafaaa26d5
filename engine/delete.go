package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConsumerLive is how recently a consumer must have fetched or extended a lease to count as live:
// a worker fetches at least every PollWait (1s by default) while it runs, so one not seen for this
// long has stopped or is stalled.
const ConsumerLive = 30 * time.Second

// ErrQueueBusy is wrapped by the error of DeleteQueue for a queue whose consumers are live.
var ErrQueueBusy = errors.New("srq: the queue has live consumers")

// DeleteQueue deletes every key of queue under prefix, of all its shards (its tasks, dead letters,
// indexes, counters, flows, outcomes and events), and its registry entry, and returns how many
// keys it deleted. Stop the queue's producers and workers first: their next calls would write
// keys anew. It refuses, deleting nothing, with an error wrapping ErrQueueBusy and naming them
// while a consumer was seen within ConsumerLive, unless force is set. It finds the keys with SCAN
// (on every master of a cluster): an operator's command, never a hot path. A queue that is not
// registered is deleted as one shard; one with no keys deletes nothing and is no error. One whose
// registry entry holds no usable shard count (StoredShardCountError) is refused with that error,
// unless force is set: then the keys of all its possible shards go, with the entry. It fails
// with ErrInvalid for a nil client or a bad name, and with the context's or Redis's error, after
// which some keys may be gone.
func DeleteQueue(ctx context.Context, client redis.UniversalClient, prefix, queue string, force bool) (int, error) {
	if isNilClient(client) {
		return 0, invalidf("nil redis client")
	}
	if err := ValidateQueueName(queue); err != nil {
		return 0, err
	}
	if err := validName("key prefix", prefix); err != nil {
		return 0, err
	}
	shards, err := QueueShards(ctx, client, prefix, queue)
	var bad *StoredShardCountError
	switch {
	case errors.Is(err, ErrQueueNotFound):
		shards, err = 1, nil
	case errors.As(err, &bad) && force:
		// Where its tasks are cannot be told: the keys of every shard count go, its own (one
		// shard) and those of the shard queues "<queue>#…" (no queue name holds '#').
		shards, err = 0, nil
	}
	if err != nil {
		return 0, err
	}
	var bases []string
	if shards == 0 {
		k, err := NewKeys(prefix, queue)
		if err != nil {
			return 0, err
		}
		bases = []string{k.Base(), strings.TrimSuffix(k.Base(), "}:") + "#"}
	}
	for i := range shards {
		k, err := NewKeys(prefix, ShardQueue(queue, shards, i))
		if err != nil {
			return 0, err
		}
		bases = append(bases, k.Base())
	}
	if !force {
		if live, err := liveConsumers(ctx, client, bases); err != nil {
			return 0, err
		} else if len(live) > 0 {
			return 0, fmt.Errorf("%w: %q: %s seen within %v (stop them, or force)", ErrQueueBusy, queue,
				strings.Join(live, ", "), ConsumerLive)
		}
	}
	deleted := 0
	for _, base := range bases {
		n, err := deleteMatching(ctx, client, base)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("srq: delete queue %q: %w", queue, err)
		}
	}
	if err := client.HDel(ctx, RegistryKey(prefix), queue).Err(); err != nil {
		return deleted, fmt.Errorf("srq: delete queue %q: %w", queue, err)
	}
	return deleted, nil
}

// liveConsumers returns the consumers seen within ConsumerLive on the server's clock, sorted.
func liveConsumers(ctx context.Context, client redis.UniversalClient, bases []string) ([]string, error) {
	now, err := client.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("srq: delete queue: %w", err)
	}
	since := fmt.Sprint(now.Add(-ConsumerLive).UnixMilli())
	seen := map[string]bool{}
	for _, base := range bases {
		ids, err := client.ZRangeByScore(ctx, Keys{base: base}.Consumers(), &redis.ZRangeBy{Min: since, Max: "+inf"}).Result()
		if err != nil {
			return nil, fmt.Errorf("srq: delete queue: %w", err)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// deleteMatching deletes the keys that start with base, found with SCAN on the server (every
// master of a cluster), 500 at a time with UNLINK: one slot's keys, so one command each.
func deleteMatching(ctx context.Context, client redis.UniversalClient, base string) (int, error) {
	pattern := globEscape(base) + "*"
	var mu sync.Mutex
	total := 0
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 500).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				n, err := c.Unlink(ctx, keys...).Result()
				if err != nil {
					return err
				}
				mu.Lock()
				total += int(n)
				mu.Unlock()
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	default:
		err = fmt.Errorf("a %T cannot be scanned", client)
	}
	return total, err
}

// globEscape escapes the characters SCAN's MATCH pattern treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
