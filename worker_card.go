package srq

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/pool"
)

// card is the record a running Worker keeps of itself in every shard of every queue it serves
// (engine.WorkerRecord): its host, pid, queues, concurrency, when its Run started, how many of
// its handlers run, and how many batches and tasks in them. Operators read it beside the queue's consumers (the dashboard's workers page).
// It is written when Run starts, written again when one of its counts changed, at
// most once per Lease/3 (the lease extension period), or every cardRefresh, and deleted when Run
// returns; written only as a worker's record, it expires an hour after its last write.
type card struct {
	consumer    string
	concurrency int
	every       time.Duration
	queues      []*shardSet
	running     atomic.Int64
	batches     atomic.Int64 // batch handlers running
	batchTasks  atomic.Int64 // the tasks in them
	log         *slog.Logger
}

// cardRefresh is how often a card is written while nothing on it changes, so that it does not
// expire (engine.WorkerRecordTTL) under a worker that runs for hours.
const cardRefresh = 5 * time.Minute

// cardTimeout bounds each write or delete of a card.
const cardTimeout = 5 * time.Second

func newCard(cfg WorkerConfig, queues []*shardSet, log *slog.Logger) *card {
	return &card{consumer: cfg.ConsumerID, concurrency: cfg.Concurrency, every: cfg.Lease / 3, queues: queues, log: log}
}

// counting wraps h so that the card counts the handlers running.
func (c *card) counting(h pool.HandleFunc) pool.HandleFunc {
	return func(ctx context.Context, d *engine.Delivery, eng *engine.Engine) ([]byte, error) {
		c.running.Add(1)
		defer c.running.Add(-1)
		return h(ctx, d, eng)
	}
}

// countingBatch wraps h so that the card counts the batch handlers running as handlers, and the
// batches and the tasks in them.
func (c *card) countingBatch(h pool.BatchFunc) pool.BatchFunc {
	return func(ctx context.Context, ds []*engine.Delivery, engs []*engine.Engine) ([][]byte, []error) {
		c.running.Add(1)
		c.batches.Add(1)
		c.batchTasks.Add(int64(len(ds)))
		defer func() {
			c.running.Add(-1)
			c.batches.Add(-1)
			c.batchTasks.Add(-int64(len(ds)))
		}()
		return h(ctx, ds, engs)
	}
}

// counts returns the counts the card shows: handlers running, batches running, tasks in them.
func (c *card) counts() [3]int64 {
	return [3]int64{c.running.Load(), c.batches.Load(), c.batchTasks.Load()}
}

// start writes the card and keeps it current until the returned stop is called, which deletes it
// and returns once the goroutine start began has ended. A write that fails is logged at Debug and
// tried again at the next tick: the card is for operators, and the worker runs without it.
func (c *card) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	host, _ := os.Hostname()
	rec := engine.WorkerRecord{Host: host, PID: os.Getpid(), Concurrency: c.concurrency, Started: time.Now()}
	for _, q := range c.queues {
		rec.Queues = append(rec.Queues, q.name)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.every)
		defer t.Stop()
		written, at := [3]int64{-1}, time.Time{}
		for {
			if n := c.counts(); n != written || time.Since(at) >= cardRefresh {
				rec.Running, rec.Batches, rec.BatchTasks, rec.Updated = int(n[0]), int(n[1]), int(n[2]), time.Now()
				if c.each(ctx, func(ctx context.Context, e *engine.Engine) error { return e.PutWorker(ctx, c.consumer, rec) }) {
					written, at = n, rec.Updated
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		// Run's context has ended: the deletes run on one that keeps its values, bounded by
		// cardTimeout in all, so a Redis that does not answer holds Run's return up no longer
		// however many shards there are.
		dctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cardTimeout)
		defer stop()
		c.each(dctx, func(ctx context.Context, e *engine.Engine) error {
			return e.DeleteWorker(ctx, c.consumer)
		})
	}
}

// each runs f on every shard of every queue of the card, each call bounded by cardTimeout, and
// reports whether all succeeded; failures are logged at Debug.
func (c *card) each(ctx context.Context, f func(context.Context, *engine.Engine) error) bool {
	ok := true
	for _, q := range c.queues {
		for _, e := range q.engines {
			cctx, cancel := context.WithTimeout(ctx, cardTimeout)
			err := f(cctx, e)
			cancel()
			if err != nil {
				ok = false
				if ctx.Err() == nil {
					c.log.Debug("srq: worker record not written", "queue", q.name, "err", err)
				}
			}
		}
	}
	return ok
}
