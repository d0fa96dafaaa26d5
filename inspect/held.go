package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// heldPartitions returns the first limit partitions of queue held by a dead letter, longest held
// first, merged over the shards: two round trips per shard (the held index, then the partitions'
// descriptions with the dead letter that holds each). A partition released between the two reads
// is left out.
func (in *Inspector) heldPartitions(ctx context.Context, queue string, limit int) ([]Partition, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, err
	}
	type held struct {
		p     Partition
		since time.Time
	}
	per := make([][]held, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		hs, _, err := e.HeldPartitions(ctx, limit)
		if err != nil || len(hs) == 0 {
			return err
		}
		keys := make([]partition.Key, len(hs))
		for j, h := range hs {
			keys[j] = h.Key
		}
		infos, now, err := e.Partitions(ctx, keys...)
		if err != nil {
			return err
		}
		for j, pi := range infos {
			if pi.HeldBy != "" {
				per[i] = append(per[i], held{partitionOf(pi, i, now), hs[j].Since})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inspect: held partitions of %q: %w", queue, err)
	}
	all := slices.Concat(per...)
	slices.SortStableFunc(all, func(a, b held) int {
		return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.p.Shard, b.p.Shard))
	})
	out := make([]Partition, 0, min(len(all), limit))
	for _, h := range all[:min(len(all), limit)] {
		out = append(out, h.p)
	}
	return out, nil
}
