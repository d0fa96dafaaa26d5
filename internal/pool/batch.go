package pool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// Batch makes a Source's tasks run in batches: a collector per source gathers the fetched tasks
// by group, and hands a group's tasks to one handler call when MaxSize of them are there, or
// MaxWait after the first came. A batch takes the tasks of an ordered partition fetched together
// (a unit) in order, and settles them in order.
type Batch struct {
	// MaxSize is the most tasks one handler call takes; at least 1 and at most what the worker
	// holds (Concurrency + Prefetch; the srq package checks it).
	MaxSize int
	// MaxWait is the longest the first task of a group waits for others before its batch runs; 0
	// runs what each fetch brought at once.
	MaxWait time.Duration
	// Group, when not nil, says which group a task belongs to: a batch holds the tasks of one
	// group. An ordered partition's run whose tasks name different groups is cut at the first
	// change, and the rest handed back unrun, in position: it comes again once the first part is
	// settled.
	Group func(d *engine.Delivery) string
	// Handle runs the handler over a batch.
	Handle BatchFunc
}

// BatchFunc runs a batch handler over ds, ds[i] of the shard engs[i], and returns for each
// delivery the result to store with its ack (nil for none) and its error, one for one. It must not
// panic: the srq package turns a handler's panic into errors before it gets here.
type BatchFunc func(ctx context.Context, ds []*engine.Delivery, engs []*engine.Engine) (results [][]byte, errs []error)

// collector gathers the units of one batch source by group until a batch is full or its first
// task has waited MaxWait, and hands each batch (its units in fetch order, flattened) to the
// handlers on out. The tasks it holds hold their slots and have their leases extended, as fetched
// tasks waiting for a handler do.
type collector struct {
	b        *Batch
	out      chan<- []*job // the handlers' units channel: room for every slot, so a send never blocks
	gathered *atomic.Int64 // the tasks gathered by every collector of the runner

	mu     sync.Mutex
	groups map[string]*gathering
	closed bool // the fetchers ended: nothing is sent on out any more
}

// gathering is one group's batch in the making.
type gathering struct {
	js    []*job
	timer *time.Timer // flushes it MaxWait after its first task came
}

func newCollector(b *Batch, out chan<- []*job, gathered *atomic.Int64) *collector {
	return &collector{b: b, out: out, gathered: gathered, groups: map[string]*gathering{}}
}

// add takes in a unit of fetched tasks. It returns the tasks it did not take, to be handed back:
// the later part of an ordered run whose tasks name different groups, or the whole unit once the
// collector is closed.
func (c *collector) add(u []*job) (back []*job) {
	key := ""
	if c.b.Group != nil {
		key = c.b.Group(u[0].d)
		for i := 1; i < len(u); i++ {
			if c.b.Group(u[i].d) != key {
				u, back = u[:i], u[i:]
				break
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return append(u, back...)
	}
	g := c.groups[key]
	if g == nil {
		g = &gathering{}
		c.groups[key] = g
		if c.b.MaxWait > 0 {
			g.timer = time.AfterFunc(c.b.MaxWait, func() { c.flush(key, g) })
		}
	}
	g.js = append(g.js, u...)
	c.gathered.Add(int64(len(u)))
	if len(g.js) >= c.b.MaxSize || c.b.MaxWait <= 0 {
		c.sendLocked(key, g)
	}
	return back
}

// flush sends g, the gathering of key, when it is still the one gathering (its timer fired).
func (c *collector) flush(key string, g *gathering) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && c.groups[key] == g {
		c.sendLocked(key, g)
	}
}

// sendLocked hands g to the handlers and forgets it. Called with mu held, before close.
func (c *collector) sendLocked(key string, g *gathering) {
	if g.timer != nil {
		g.timer.Stop()
	}
	delete(c.groups, key)
	c.gathered.Add(-int64(len(g.js)))
	c.out <- g.js
}

// flushAll sends every group's batch now (RunOnce: no more tasks come).
func (c *collector) flushAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, g := range c.groups {
		c.sendLocked(key, g)
	}
}

// close stops the collector and returns the tasks it gathered, to be handed back unrun: after
// close nothing is sent on out.
func (c *collector) close() []*job {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var js []*job
	for key, g := range c.groups {
		if g.timer != nil {
			g.timer.Stop()
		}
		js = append(js, g.js...)
		c.gathered.Add(-int64(len(g.js)))
		delete(c.groups, key)
	}
	return js
}

// dispatch hands a unit to the handlers, through its source's collector for a batch source.
func (p *runner) dispatch(u []*job, units chan<- []*job) {
	c := p.collectors[u[0].src]
	if c == nil {
		units <- u // never blocks: units has room for every slot
		return
	}
	p.handBack(c.add(u))
	if len(p.slots) == 0 && p.gathered.Load() >= int64(p.limit()) {
		// Every task the worker holds waits in a batch that is not full (tasks of many groups): no
		// fetch can fill one, and nothing would run before MaxWait. They run now.
		for _, c := range p.collectors {
			c.flushAll()
		}
	}
}

// newCollectors makes a collector for every batch source, sending on units.
func (p *runner) newCollectors(units chan<- []*job) {
	p.collectors = map[*source]*collector{}
	for _, s := range p.sources {
		if s.Batch != nil {
			p.collectors[s] = newCollector(s.Batch, units, &p.gathered)
		}
	}
}

// closeCollectors stops every collector and hands back, in one call per shard, the tasks they
// gathered: no handler started them.
func (p *runner) closeCollectors() {
	var js []*job
	for _, c := range p.collectors {
		js = append(js, c.close()...)
	}
	p.handBack(js)
}

// chainsOf splits a batch's tasks into chains that settle apart: the tasks of one ordered
// partition of one shard form one chain, in order; every other task is a chain alone.
func chainsOf(js []*job) [][]*job {
	type runKey struct {
		eng *engine.Engine
		key partition.Key
	}
	var chains [][]*job
	at := map[runKey]int{}
	for _, j := range js {
		if j.d.Partition.IsOrdered() {
			k := runKey{j.eng, j.d.Partition}
			if i, ok := at[k]; ok {
				chains[i] = append(chains[i], j)
				continue
			}
			at[k] = len(chains)
		}
		chains = append(chains, []*job{j})
	}
	return chains
}

// runBatch runs a batch: one handler call over up to MaxSize of its tasks at a time (a batch is
// longer only when an ordered run made it so; the rest of that run goes in the next call, after
// the first part is settled), then settles each task with its own error, every chain in order: a
// task of an ordered partition that goes back takes the later ones of its run back with it,
// whatever their handler made of them, as in a unit.
func (p *runner) runBatch(js []*job) {
	b := js[0].src.Batch
	chains := chainsOf(js)
	for len(chains) > 0 {
		select {
		case <-p.stopping:
			p.handBack(slices.Concat(chains...))
			return
		default:
		}
		// This call's part of each chain: whole chains while they fit, and the head of the next.
		var parts [][]*job
		for n := 0; len(parts) < len(chains) && n < b.MaxSize; {
			c := chains[len(parts)]
			take := min(len(c), b.MaxSize-n)
			parts = append(parts, c[:take])
			n += take
		}
		done := make([]bool, len(parts))    // the chain has nothing left to run
		rests := make([][]*job, len(parts)) // what is left of the chain after this call's part
		var run []*job
		for k, part := range parts {
			rests[k] = chains[k][len(part):]
			for i, j := range part {
				if !p.mayStart(j) {
					// As in runUnit: a lease about to end, or lost, sends the rest of its chain back.
					j.src.log.Info("the lease of a task ran out before its batch started (the worker stalled, or its extensions failed); handing them back",
						"task", j.d.ID, "tasks", len(chains[k])-i)
					p.handBack(chains[k][i:])
					parts[k], rests[k], done[k] = part[:i], nil, true
					break
				}
			}
			for _, j := range parts[k] {
				if !errors.Is(context.Cause(j.ctx), engine.ErrCancelled) {
					run = append(run, j)
				}
			}
		}
		errs := map[*job]error{}
		var settled map[*job]bool
		if len(run) > 0 {
			p.callBatch(b, run, errs)
			settled = p.settleUnordered(run, errs)
		}
		for k, part := range parts {
			for i, j := range part {
				if settled[j] {
					continue // an unordered task: its chain ends with it
				}
				err, ran := errs[j]
				if !ran {
					err = context.Cause(j.ctx) // cancelled before it started: settled as cancelled, never run
				}
				lost := errors.Is(context.Cause(j.ctx), p.cfg.LeaseLost)
				stop := true
				next := p.settle(j, err)
				if next == diedRest {
					// The later tasks of this call's part ran with it: unless its death holds the
					// partition, the partition goes on, and each is settled with its own error.
					next = handBackRest
					if !p.holdsPartition(j) {
						next = runRest
					}
				}
				switch {
				case next == handBackRest || next == runRest && lost:
					p.handBack(slices.Concat(part[i+1:], rests[k]))
				case next != runRest:
					for _, later := range slices.Concat(part[i+1:], rests[k]) {
						p.release(later)
					}
				default:
					stop = false
				}
				if stop {
					rests[k], done[k] = nil, true
					break
				}
			}
			if !done[k] {
				chains[k] = rests[k]
				done[k] = len(rests[k]) == 0
			}
		}
		var left [][]*job
		for k, c := range chains {
			if k >= len(parts) || !done[k] {
				left = append(left, c)
			}
		}
		chains = left
	}
}

// settleUnordered settles the unordered tasks of a batch that failed, together: those cut off by
// shutdown in one hand-back, those that go back (a retry, a reject, a wait) in one reject call per
// shard, where settle makes a call for each. An unordered task is a chain alone, so nothing
// follows it. It returns the tasks it settled; the others (acked, dead-lettered, cancelled, or of
// an ordered partition) are left to settle.
func (p *runner) settleUnordered(run []*job, errs map[*job]error) map[*job]bool {
	settled := map[*job]bool{}
	var back []*job
	rejects := map[*engine.Engine][]*job{}
	rejections := map[*engine.Engine][]engine.Rejection{} // rejections[e][i] settles rejects[e][i]
	for _, j := range run {
		err := errs[j]
		if err == nil || j.d.Partition.IsOrdered() || errors.Is(context.Cause(j.ctx), engine.ErrCancelled) {
			continue
		}
		v := p.cfg.Classify(err)
		switch {
		case v.Kind == Permanent:
			continue
		case errors.Is(context.Cause(j.ctx), p.cfg.Shutdown):
			back = append(back, j) // as in settle: cut off, the task did not fail
		default:
			if v.Panic != nil {
				j.src.log.Error("handler panic", "task", j.d.ID, "panic", v.Panic, "stack", string(v.Stack))
			}
			rejects[j.eng] = append(rejects[j.eng], j)
			rejections[j.eng] = append(rejections[j.eng], p.rejection(j, err, v))
		}
		settled[j] = true
	}
	p.handBack(back)
	for eng, group := range rejects {
		rs := rejections[eng]
		var res []engine.RejectResult
		rerr := p.settleCall(context.WithoutCancel(group[0].ctx), func(ctx context.Context) (err error) {
			res, err = eng.Reject(ctx, rs)
			return err
		})
		if rerr != nil {
			p.log(eng).Error("reject failed; the tasks return when their leases expire", "tasks", len(group), "err", rerr)
		}
		for i, j := range group {
			if rerr == nil && res[i].Err != nil {
				j.src.log.Info("reject refused: the lease was lost", "task", j.d.ID, "err", res[i].Err)
			}
			p.release(j)
		}
	}
	return settled
}

// callBatch runs the source's batch handler over run and records each task's error in errs and
// its result in the job. The handler's context ends when any task's lease is lost (its cause) or
// shutdown cuts the handlers off: a handler never holds a task past its lease. A task cancelled
// while it runs does not end it: that task alone is settled as cancelled.
func (p *runner) callBatch(b *Batch, run []*job, errs map[*job]error) {
	p.inHandler.Add(1)
	defer p.inHandler.Add(-1)
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(run[0].ctx))
	defer cancel(nil)
	ds := make([]*engine.Delivery, len(run))
	engs := make([]*engine.Engine, len(run))
	for i, j := range run {
		ds[i], engs[i] = j.d, j.eng
		stop := context.AfterFunc(j.ctx, func() {
			if cause := context.Cause(j.ctx); !errors.Is(cause, engine.ErrCancelled) {
				cancel(cause)
			}
		})
		defer stop()
	}
	results, es := b.Handle(ctx, ds, engs)
	for i, j := range run {
		j.result = results[i]
		errs[j] = es[i]
	}
}
