package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// bundle is what most engine tests need: an engine on a queue of their own, its client, a context.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	client *redis.Client
	eng    *Engine
	server *redistest.Server
}

// setup returns an engine on a fresh queue of the shared Redis; cfg.Queue is filled in.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	srv := redistest.Shared(t)
	c := srv.Client(t)
	cfg.Queue = redistest.Queue(t)
	e, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &bundle{t: t, ctx: ctx, client: c, eng: e, server: srv}
}

// setupBig is setup for a test whose calls run scripts over thousands of tasks: its client waits a
// minute for a reply instead of go-redis's 3 seconds, and its context lasts 3 minutes. The embedded
// Redis runs a script in Go in this process (under -race for seconds), and a real one on a loaded
// machine (the suite's packages in parallel on two cores) can take over 3 seconds too.
func setupBig(t *testing.T, cfg Config) *bundle {
	t.Helper()
	b := setup(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	b.ctx = ctx
	b.client = b.server.ClientWith(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = time.Minute, time.Minute })
	cfg.Queue = b.eng.cfg.Queue
	e, err := New(b.client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.eng = e
	return b
}

// publish adds msgs and fails the test on any error or duplicate.
func (b *bundle) publish(msgs ...Message) []string {
	b.t.Helper()
	res, err := b.eng.Publish(b.ctx, msgs)
	if err != nil {
		b.t.Fatalf("publish: %v", err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Duplicate {
			b.t.Fatalf("publish: message %d (%s) reported duplicate", i, r.ID)
		}
		ids[i] = r.ID
	}
	return ids
}

// fetch leases up to n tasks for consumer with a long lease.
func (b *bundle) fetch(consumer string, n int) []Delivery {
	b.t.Helper()
	ds, err := b.eng.Fetch(b.ctx, consumer, n, time.Minute)
	if err != nil {
		b.t.Fatalf("fetch: %v", err)
	}
	return ds
}

// ack acks ds and fails the test unless every ack succeeds.
func (b *bundle) ack(ds ...Delivery) {
	b.t.Helper()
	rs := make([]Receipt, len(ds))
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	errs, err := b.eng.Ack(b.ctx, rs)
	if err != nil {
		b.t.Fatalf("ack: %v", err)
	}
	for i, e := range errs {
		if e != nil {
			b.t.Fatalf("ack %s: %v", rs[i].ID, e)
		}
	}
}

// drain fetches and acks one task at a time until nothing is ready, returning the ids in order.
func (b *bundle) drain(consumer string) []string {
	b.t.Helper()
	var ids []string
	for {
		ds := b.fetch(consumer, 1)
		if len(ds) == 0 {
			return ids
		}
		ids = append(ids, ds[0].ID)
		b.ack(ds...)
	}
}

func (b *bundle) stats() Stats {
	b.t.Helper()
	s, err := b.eng.Stats(b.ctx)
	if err != nil {
		b.t.Fatalf("stats: %v", err)
	}
	return s
}

// serverNow reads the Redis server's clock.
func (b *bundle) serverNow() time.Time {
	b.t.Helper()
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	return now
}

// waitServerPast waits until the server's clock passes t: a condition with a deadline, because
// leases and delays follow the server's clock, not this process's.
func (b *bundle) waitServerPast(t time.Time) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !b.serverNow().After(t) {
		if time.Now().After(deadline) {
			b.t.Fatalf("server clock did not pass %v", t)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// publishConcurrently runs producers goroutines at once, each publishing each messages of one
// task a call, the i-th of producer g being msg(g, i), and fails the test on an error or a
// duplicate.
func (b *bundle) publishConcurrently(producers, each int, msg func(g, i int) Message) {
	b.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for g := range producers {
		wg.Go(func() {
			for i := range each {
				m := msg(g, i)
				res, err := b.eng.Publish(b.ctx, []Message{m})
				if err == nil && (len(res) != 1 || res[0].Duplicate) {
					err = fmt.Errorf("publish %s: %+v", m.ID, res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.t.Fatal(err)
	}
}

// waitLeasesExpired waits until the server's clock passes the lease deadline Redis holds for each
// of ds: Delivery.LeaseDeadline may be earlier than that (it is never later).
func (b *bundle) waitLeasesExpired(ds ...Delivery) {
	b.t.Helper()
	for _, d := range ds {
		info, err := b.eng.Task(b.ctx, d.ID)
		if err != nil {
			b.t.Fatal(err)
		}
		b.waitServerPast(info.LeaseEnds)
	}
}
