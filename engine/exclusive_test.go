package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestOrderedExclusivityUnderExpiryAndRecovery runs 8 consumers over 20 ordered partitions with
// short leases. Some consumers stall past their lease and then try to ack late; every consumer
// also runs recovery. From a log of deliveries and acks it checks that
//   - once a partition was delivered again by another fetch, no ack of an older delivery of it
//     succeeds (two consumers never both hold it), and
//   - each partition's tasks complete in publish order. Acks of different consumers are logged
//     here in whatever order their replies arrive, so completion order is read from the fencing
//     tokens of the acked deliveries: tokens grow in the order Redis handed the deliveries out.
func TestOrderedExclusivityUnderExpiryAndRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const parts, each, consumers = 20, 30, 8
	seed := rand.Uint64()
	t.Logf("seed %d", seed)

	want := map[partition.Key][]string{}
	var msgs []Message
	for i := 0; i < each; i++ {
		for p := 0; p < parts; p++ {
			key := partition.Ordered(fmt.Sprintf("p%02d", p))
			id := fmt.Sprintf("p%02d-%02d", p, i)
			msgs = append(msgs, Message{ID: id, Partition: key})
			want[key] = append(want[key], id)
		}
	}
	b.publish(msgs...)

	type delivery struct {
		at    int64 // log position when the fetch returned
		fetch int64
		token Token
		who   int
	}
	var (
		mu         sync.Mutex
		clock      atomic.Int64
		fetches    atomic.Int64
		deliveries = map[partition.Key][]delivery{}
		completed  = map[partition.Key][]Delivery{}
		done       atomic.Int64
		violations []string
	)
	check := func(d Delivery, fetch int64, sentAt int64) {
		// called with mu held, for an ack that succeeded
		for _, other := range deliveries[d.Partition] {
			if other.fetch != fetch && other.token > d.Token && other.at < sentAt {
				violations = append(violations, fmt.Sprintf("%s: ack of token %d (fetch %d) succeeded after fetch %d got token %d",
					d.Partition, d.Token, fetch, other.fetch, other.token))
			}
		}
		completed[d.Partition] = append(completed[d.Partition], d)
	}

	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			name := fmt.Sprintf("c%d", c)
			for done.Load() < parts*each && ctx.Err() == nil {
				if _, err := b.eng.Recover(ctx); err != nil {
					t.Error(err)
					return
				}
				ds, err := b.eng.Fetch(ctx, name, 1+rng.IntN(3), 80*time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				fetch := fetches.Add(1)
				mu.Lock()
				at := clock.Add(1)
				for _, d := range ds {
					deliveries[d.Partition] = append(deliveries[d.Partition], delivery{at, fetch, d.Token, c})
				}
				mu.Unlock()
				if len(ds) == 0 {
					continue
				}
				if rng.IntN(8) == 0 {
					b.expire(ds) // stall past the lease, then try to finish anyway
				}
				// Ack in delivery order, one at a time, as a worker finishing tasks does.
				for _, d := range ds {
					sentAt := clock.Add(1)
					errs, err := b.eng.Ack(ctx, []Receipt{d.Receipt()})
					if err != nil {
						t.Error(err)
						return
					}
					switch {
					case errs[0] == nil:
						mu.Lock()
						check(d, fetch, sentAt)
						mu.Unlock()
						done.Add(1)
					case errors.Is(errs[0], ErrStaleToken) || errors.Is(errs[0], ErrNotFound):
					default:
						t.Error(errs[0])
					}
				}
			}
		}()
	}
	wg.Wait()
	if done.Load() != parts*each {
		t.Fatalf("completed %d of %d tasks", done.Load(), parts*each)
	}
	for _, v := range violations {
		t.Error(v)
	}
	for p, ids := range want {
		acked := completed[p]
		slices.SortFunc(acked, func(a, b Delivery) int { return cmp.Compare(a.Token, b.Token) })
		assertOrder(t, idsOf(acked), ids)
	}
	b.assertNoTaskKeys()
}
