package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// bundle is what an Inspector test needs: a prefix of its own on the shared Redis (so the queue
// registry is the test's own), an Inspector over it, and the engines of one queue's shards.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	client *redis.Client
	prefix string
	queue  string
	in     *Inspector
	shards []*engine.Engine
}

// setup returns a bundle whose queue "q" is registered with n shards.
func setup(t *testing.T, n int) *bundle {
	t.Helper()
	return setupOn(t, redistest.Client(t), n)
}

func setupOn(t *testing.T, c *redis.Client, n int) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	b := &bundle{t: t, ctx: ctx, client: c, prefix: "i" + redistest.Queue(t), queue: "q"}
	var err error
	if b.in, err = New(c, Config{Prefix: b.prefix}); err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterQueue(ctx, c, b.prefix, b.queue, n); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e, err := engine.New(c, engine.Config{Queue: engine.ShardQueue(b.queue, n, i), Prefix: b.prefix,
			DeadLetterMaxCount: -1, DeadLetterMaxAge: -1})
		if err != nil {
			t.Fatal(err)
		}
		b.shards = append(b.shards, e)
	}
	t.Cleanup(func() {
		if err := redistest.DropKeys(context.Background(), c, b.prefix); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return b
}

// eng returns the engine of the shard that holds partition p.
func (b *bundle) eng(p partition.Key) *engine.Engine {
	return b.shards[engine.ShardOf(p, len(b.shards))]
}

// publish adds one task per message, each to the shard of its partition, and returns the ids.
func (b *bundle) publish(msgs ...engine.Message) []string {
	b.t.Helper()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		res, err := b.eng(m.Partition).Publish(b.ctx, []engine.Message{m})
		if err != nil || res[0].Duplicate {
			b.t.Fatalf("publish %+v: %v %+v", m, err, res)
		}
		ids[i] = res[0].ID
	}
	return ids
}

// fetchAll leases every available task of every shard for consumer, one a call, so an ordered
// partition hands out only its first task.
func (b *bundle) fetchAll(consumer string, lease time.Duration) []engine.Delivery {
	b.t.Helper()
	var all []engine.Delivery
	for _, e := range b.shards {
		for {
			ds, err := e.Fetch(b.ctx, consumer, 1, lease) // one a call: no ordered runs
			if err != nil {
				b.t.Fatal(err)
			}
			if len(ds) == 0 {
				break
			}
			all = append(all, ds...)
		}
	}
	return all
}

// kill dead-letters leased d with reason.
func (b *bundle) kill(d engine.Delivery, reason string) {
	b.t.Helper()
	errs, err := b.eng(d.Partition).Kill(b.ctx, []engine.Failure{{Receipt: d.Receipt(), Reason: reason}})
	if err != nil || errs[0] != nil {
		b.t.Fatalf("kill %s: %v %v", d.ID, err, errs)
	}
}

// allDead lists every dead letter matching q through the cursor, pages of limit.
func (b *bundle) allDead(q DeadQuery) []DeadLetter {
	b.t.Helper()
	var out []DeadLetter
	for range 10_000 {
		page, err := b.in.DeadLetters(b.ctx, b.queue, q)
		if err != nil {
			b.t.Fatal(err)
		}
		if len(page.Letters) > q.Limit && q.Limit > 0 {
			b.t.Fatalf("page of %d letters, limit %d", len(page.Letters), q.Limit)
		}
		out = append(out, page.Letters...)
		if page.Next == "" {
			return out
		}
		q.Cursor = page.Next
	}
	b.t.Fatal("dead-letter cursor never ended")
	return nil
}

func ids[T any](xs []T, id func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = id(x)
	}
	return strings.Join(s, ",")
}

func mustErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

func msg(id string, p partition.Key) engine.Message {
	return engine.Message{ID: id, Partition: p, Payload: []byte("payload-" + id)}
}

func msgs(prefix string, p partition.Key, n int) []engine.Message {
	out := make([]engine.Message, n)
	for i := range out {
		out[i] = msg(fmt.Sprintf("%s%02d", prefix, i), p)
	}
	return out
}
