package pool

import (
	"context"
	"errors"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// fetchLoop fetches from one shard's engine as many tasks as there are free slots, groups them
// into units (the tasks of one ordered partition together, every other task alone) and hands the
// units to the handlers. While the shard has no work it blocks in Redis holding no slot, so the
// fetchers of other shards can use them. The fetchers of a sharded queue take turns (FIFO): one at
// a time takes every free slot and fetches, so each fetch gets as big a batch as a single shard's
// would, instead of the free slots being split between the shards' fetchers. A queue of one shard
// has two fetchers with a turn each, so one can fetch while the other's call is under way; that
// second fetch first waits until it holds half of all slots, or the other returns (fetchFree).
// While tasks finish faster than a round trip (a worker Redis keeps busy) the two calls overlap
// and Redis is not left idle between a reply and the next call; with slower handlers they mostly
// follow each other, each larger. On a queue of one shard the fetcher also carries the queued acks
// (ackQueue). It ends when ctx ends.
func (p *runner) fetchLoop(ctx, handlerCtx context.Context, units chan []*job, shard *shardFetchers) error {
	eng := shard.eng
	// This fetcher takes the queued acks along with its fetches while it fetches, and leaves them
	// to the acker while it waits or backs off.
	rides := p.acksRide()
	riding := false
	ride := func(on bool) {
		if rides && riding != on {
			riding = on
			p.acks[eng].ride(on)
		}
	}
	defer ride(false)
	for {
		// After a failed fetch the shard is probed: one slot, taken outside the turns. A node that
		// does not answer holds a call up to the client's timeouts (and go-redis's retries), and a
		// fetch of it holding the turn and every free slot would stall the other shards' fetches as
		// long: it does so at most once, for the call that found it failing.
		probe := shard.probing()
		ride(true)
		if !probe {
			select {
			case <-ctx.Done():
				return nil
			case p.turn <- struct{}{}:
			}
		}
		select {
		case <-ctx.Done():
			if !probe {
				<-p.turn
			}
			return nil
		case <-p.slots:
		}
		ds, nextDue, err := p.fetchFree(ctx, shard, probe)
		if !probe {
			<-p.turn
		}
		if err == nil && len(ds) == 0 {
			ride(false)
			wait, due := p.cfg.PollWait, false
			if nextDue >= 0 && nextDue < wait {
				wait, due = max(nextDue, time.Millisecond), true
			}
			var woken bool
			woken, err = shard.wait(ctx, wait, due)
			if woken && len(p.slots) == 0 {
				// Every slot is busy (with other shards' work): hand the wake-up on, so an idle
				// worker takes this shard's work now rather than at the end of its own wait. (A
				// slot freed meanwhile only means two fetches for the work; one finds nothing.)
				if err := eng.Wake(ctx); err != nil && ctx.Err() == nil {
					p.log(eng).Warn("handing on a wake-up failed", "err", err)
				}
			}
		}
		if err != nil {
			ride(false)
			if ctx.Err() != nil {
				return nil
			}
			backoff := shard.failed()
			p.log(eng).Error("fetch failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		shard.succeeded()
		if len(ds) == 0 {
			continue
		}
		shard.busy()
		engs := make([]*engine.Engine, len(ds))
		for i := range engs {
			engs[i] = eng
		}
		for _, u := range p.group(ds, engs, handlerCtx) {
			p.dispatch(u, units)
		}
	}
}

// fetchFree fetches for the free slots: it holds one already, takes every other free one, and
// gives back those the fetch found no task for. A fetch that begins while the shard's other
// fetcher's is under way first waits until it holds half of all slots, or the other returns (and
// then takes what is free), or ctx ends: both calls in flight stay large, rather than this one
// taking what is free at once. A probe fetches for the one slot it holds.
func (p *runner) fetchFree(ctx context.Context, shard *shardFetchers, probe bool) ([]engine.Delivery, time.Duration, error) {
	n := 1
	other := shard.begin()
	if !probe {
		n += p.grabSlots(cap(p.slots) - 1)
		if other != nil {
			n = p.waitSlots(ctx, other, n)
		}
	}
	ds, nextDue, err := p.fetch(ctx, shard.eng, n)
	for i := len(ds); i < n; i++ {
		p.slots <- struct{}{}
	}
	// After the slots went back: a fetch waiting for this one to end finds them.
	shard.end()
	return ds, nextDue, err
}

// waitSlots, holding n slots while another fetch of the shard is under way, takes more until it
// holds half of the tasks the worker may hold (limit), or the other fetch returns (then it takes
// every slot free), or ctx ends. It returns how many slots it holds.
func (p *runner) waitSlots(ctx context.Context, other <-chan struct{}, n int) int {
	for n < p.limit()/2 {
		select {
		case <-p.slots:
			n++
		case <-other:
			return n + p.grabSlots(cap(p.slots)-n)
		case <-ctx.Done():
			return n // the fetch fails with ctx's error and gives the slots back
		}
	}
	return n
}

// limit is how many tasks the worker may hold now, fetched or running: every slot with a fixed
// prefetch, Concurrency plus the prefetch now with an adaptive one (whose other slots are kept out
// of circulation).
func (p *runner) limit() int {
	if p.pf == nil {
		return cap(p.slots)
	}
	return p.cfg.Concurrency + p.pf.prefetch()
}

// grabSlots takes up to max of the slots free now, without waiting, and returns how many.
func (p *runner) grabSlots(max int) int {
	for n := 0; n < max; n++ {
		select {
		case <-p.slots:
		default:
			return n
		}
	}
	return max
}

// acksRide says whether the fetchers take the queued acks along with their fetches: on a queue of
// one shard, and in a pool over several queues (runMulti), where a shard's acks ride while the
// shard is in the turns. With several shards of one queue, the fetchers of the shards take turns,
// so a shard's acks would wait for its fetcher's turn: each shard's acker sends them, so a slow
// node never holds up a fetch.
func (p *runner) acksRide() bool { return p.multi || len(p.engines) == 1 }

// fetch leases up to n tasks from eng, taking the queued acks along in the same call when acks
// ride (AckFetch, one round trip and one script instead of two).
func (p *runner) fetch(ctx context.Context, eng *engine.Engine, n int) ([]engine.Delivery, time.Duration, error) {
	var mine []*job
	if p.acksRide() {
		mine = p.acks[eng].take()
	}
	start := time.Now()
	if len(mine) == 0 {
		ds, nextDue, err := eng.FetchNext(ctx, p.cfg.Consumer, n, p.cfg.Lease)
		p.sized(start, ds)
		return ds, nextDue, err
	}
	errs, ds, nextDue, err := eng.AckFetch(ctx, receipts(mine), p.cfg.Consumer, n, p.cfg.Lease)
	p.sized(start, ds)
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// Run's context ended before the call went out: the acks must still be sent.
		p.ack(eng, mine)
		return nil, 0, err
	case err != nil && transient(err):
		// The tasks are still held: the acker sends their acks again, with its pauses (ack).
		p.acks[eng].retry(mine)
	default:
		p.acked(mine, errs, err)
	}
	return ds, nextDue, err
}

// sized passes a fetch that started at start and brought ds to an adaptive prefetch.
func (p *runner) sized(start time.Time, ds []engine.Delivery) {
	if p.pf != nil && len(ds) > 0 {
		p.pf.fetched(start, time.Now())
	}
}

// group makes units of ds, whose shard engines engs gives, one for one.
func (p *runner) group(ds []engine.Delivery, engs []*engine.Engine, handlerCtx context.Context) [][]*job {
	var units [][]*job
	ordered := map[partition.Key]int{}
	for i := range ds {
		j := p.newJob(&ds[i], engs[i], handlerCtx)
		if key := ds[i].Partition; key.IsOrdered() {
			if k, ok := ordered[key]; ok {
				units[k] = append(units[k], j)
				continue
			}
			ordered[key] = len(units)
		}
		units = append(units, []*job{j})
	}
	return units
}

// newJob makes a job of d, fetched from eng, and holds it until it is released.
func (p *runner) newJob(d *engine.Delivery, eng *engine.Engine, handlerCtx context.Context) *job {
	ctx, cancel := context.WithCancelCause(handlerCtx)
	j := &job{d: d, src: p.srcOf[eng], eng: eng, ctx: ctx, cancel: cancel, deadline: d.LeaseDeadline}
	j.timer = time.AfterFunc(time.Until(d.LeaseDeadline), func() { cancel(p.cfg.LeaseLost) })
	p.mu.Lock()
	p.jobs[j] = struct{}{}
	p.mu.Unlock()
	return j
}
