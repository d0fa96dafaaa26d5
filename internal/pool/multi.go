package pool

import (
	"context"
	"sync"
	"time"

	"github.com/srqueue/srq/engine"
)

// busyWaitSlice bounds a wait in Redis for the idle queues of a pool that has other queues busy:
// a queue that runs dry meanwhile joins the wait within it, so its next task is picked up within
// about this long while the others keep the pool busy.
const busyWaitSlice = 50 * time.Millisecond

// shardState is where one shard of a pool over several queues stands (picker).
type shardState int

const (
	shardReady    shardState = iota // it may have work: a fetcher fetches it when its queue's turn comes
	shardFetching                   // a fetch of it is under way
	shardIdle                       // its last fetch found nothing (or failed): a waiter watches it
)

// mshard is one shard of a queue of a pool over several queues.
type mshard struct {
	eng     *engine.Engine
	acks    *ackQueue
	riding  bool // its acks ride with its fetches: it is ready or being fetched
	src     *msource
	w       *waiter
	state   shardState
	due     time.Time     // idle: when its delayed work is due, or its backoff ends; zero: none known
	looked  time.Time     // when a fetch last found it empty
	backoff time.Duration // after failed fetches: 50ms, doubling to 5s; 0 after a fetch that did not fail
}

// ride says whether sh's queued acks ride with its next fetch (ackQueue.ride): while it is in the
// turns, a fetch of it comes soon and carries them; while it is idle, the acker sends them.
// Called with the picker's mu held, or once the fetchers have ended.
func (sh *mshard) ride(on bool) {
	if sh.riding != on {
		sh.riding = on
		sh.acks.ride(on)
	}
}

// msource is one queue of a pool over several queues: its shards and its place in the turns.
type msource struct {
	src    *source
	weight float64
	pass   float64 // tasks fetched over weight, from where the queue last joined the turns
	shards []*mshard
	next   int // the shard its next turn starts looking at
}

// picker gives the turns to fetch among the queues of a pool over several queues: each fetch goes
// to the queue with ready work that has fetched the fewest tasks for its weight (stride
// scheduling), so under load the queues take tasks in the shares of their weights, and a flooded
// queue cannot keep a queue with work from its turns. A queue that was idle joins at the level of
// the busy ones (vtime): idle time earns no credit.
type picker struct {
	mu      sync.Mutex
	sources []*msource
	vtime   float64       // the pass of the queue picked last
	changed chan struct{} // closed, and replaced, when a shard becomes ready or idle
	takers  int           // fetchers waiting in take for a ready shard, each holding its fetch's slots
}

func (k *picker) notifyLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// take waits until a shard is ready and returns the one whose queue's turn it is, marked as
// fetching; nil when ctx ends.
func (k *picker) take(ctx context.Context) *mshard {
	for {
		k.mu.Lock()
		var best *msource
		for _, s := range k.sources {
			if s.readyShard() >= 0 && (best == nil || s.pass < best.pass) {
				best = s
			}
		}
		if best != nil {
			i := best.readyShard()
			best.next = (i + 1) % len(best.shards)
			sh := best.shards[i]
			sh.state = shardFetching
			k.vtime = best.pass
			k.mu.Unlock()
			return sh
		}
		ch := k.changed
		k.takers++
		k.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-ch:
		}
		k.mu.Lock()
		k.takers--
		k.mu.Unlock()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// readyShard returns the index of the source's next ready shard, from next on; -1 for none.
// Called with the picker's mu held.
func (s *msource) readyShard() int {
	for k := range s.shards {
		i := (s.next + k) % len(s.shards)
		if s.shards[i].state == shardReady {
			return i
		}
	}
	return -1
}

// active says whether any of the source's shards is ready or being fetched. Called with mu held.
func (s *msource) active() bool {
	for _, sh := range s.shards {
		if sh.state != shardIdle {
			return true
		}
	}
	return false
}

// fetched records the end of sh's fetch: got tasks, nextDue (as engine.FetchNext), err.
func (k *picker) fetched(sh *mshard, got int, nextDue time.Duration, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	switch {
	case err != nil:
		sh.backoff = min(max(2*sh.backoff, 50*time.Millisecond), 5*time.Second)
		sh.state, sh.due, sh.looked = shardIdle, now.Add(sh.backoff), now
		sh.ride(false)
	case got == 0 && nextDue != 0:
		sh.backoff = 0
		sh.state, sh.due, sh.looked = shardIdle, time.Time{}, now
		sh.ride(false)
		if nextDue > 0 {
			sh.due = now.Add(nextDue)
		}
	default:
		// Tasks came, or the fetch dead-lettered unreadable ones and ready work may be behind them.
		sh.backoff = 0
		sh.state = shardReady
		sh.src.pass += float64(got) / sh.src.weight
	}
	k.notifyLocked()
	sh.w.poke()
}

// wake marks sh, idle, ready: a wake-up came for it, its delayed work is due, or it is looked at
// again. A queue that had no shard active joins the turns at the level of the others. Called with
// mu held.
func (k *picker) wakeLocked(sh *mshard) {
	if sh.state != shardIdle {
		return
	}
	if !sh.src.active() {
		sh.src.pass = max(sh.src.pass, k.vtime)
	}
	sh.state = shardReady
	sh.ride(true)
	k.notifyLocked()
}

// anyActive says whether any shard of the pool is ready or being fetched. Called with mu held.
func (k *picker) anyActiveLocked() bool {
	for _, s := range k.sources {
		if s.active() {
			return true
		}
	}
	return false
}

// waiter waits in Redis, in one blocking call, for the idle shards of the queues that can be
// waited for together (engine.CanWaitTogether): on a single node or Sentinel every queue of the
// pool; on a Cluster each queue has a waiter of its own.
type waiter struct {
	shards []*mshard
	poked  chan struct{} // capacity 1: the set of idle shards changed
}

// poke tells the waiter that one of its shards changed state.
func (w *waiter) poke() {
	select {
	case w.poked <- struct{}{}:
	default:
	}
}

// run waits for work for w's idle shards until ctx ends: one blocking pop over all their wake-up
// lists, bounded by PollWait, by the earliest due time among them and, while other shards of the
// pool are busy, by busyWaitSlice. A wake-up marks its shard ready (and is handed on when every
// slot is busy, as a single queue's fetcher does); a due time marks its shard ready. A wait of a
// whole PollWait with nothing due marks ready the one idle shard looked at longest ago, if that
// was a PollWait ago or more: so an idle pool makes one fetch and one blocking call a PollWait,
// whatever the number of its queues, and still looks at every queue now and then.
func (p *runner) waiterRun(ctx context.Context, k *picker, w *waiter) {
	var backoff time.Duration
	for {
		k.mu.Lock()
		var (
			engs   []*engine.Engine
			idle   []*mshard
			due    time.Time
			oldest *mshard
		)
		for _, sh := range w.shards {
			if sh.state != shardIdle {
				continue
			}
			engs, idle = append(engs, sh.eng), append(idle, sh)
			if !sh.due.IsZero() && (due.IsZero() || sh.due.Before(due)) {
				due = sh.due
			}
			if oldest == nil || sh.looked.Before(oldest.looked) {
				oldest = sh
			}
		}
		busy := k.anyActiveLocked()
		k.mu.Unlock()
		if len(engs) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-w.poked:
			}
			continue
		}
		d, full := p.cfg.PollWait, true
		if !due.IsZero() && time.Until(due) < d {
			d, full = max(time.Until(due), time.Millisecond), false
		}
		if busy && d > busyWaitSlice {
			d, full = busyWaitSlice, false
		}
		i, err := engine.WaitAny(ctx, engs, d)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			p.log(engs[0]).Error("wait for work failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			full = false
		} else {
			backoff = 0
		}
		now := time.Now()
		k.mu.Lock()
		// A fetcher waiting in take fetches the woken shard now; with none, and no slot free,
		// the wake-up is handed on.
		handOn := i >= 0 && k.takers == 0 && len(p.slots) == 0
		if i >= 0 {
			k.wakeLocked(idle[i])
		}
		for _, sh := range idle {
			if !sh.due.IsZero() && !now.Before(sh.due) {
				k.wakeLocked(sh)
			}
		}
		if i < 0 && full && oldest.state == shardIdle && now.Sub(oldest.looked) >= p.cfg.PollWait {
			k.wakeLocked(oldest)
		}
		k.mu.Unlock()
		if handOn {
			// Every slot is busy (with other queues' work): hand the wake-up on, so an idle worker
			// takes this queue's work now.
			if err := engs[i].Wake(ctx); err != nil && ctx.Err() == nil {
				p.log(engs[i]).Warn("handing on a wake-up failed", "err", err)
			}
		}
	}
}

// runMulti runs the fetchers of a pool over several queues until ctx ends: two fetchers that take
// turns by the picker, each holding its fetch's slots while it looks for a ready shard, and a
// waiter per group of queues that can be waited for together. A fetch takes every free slot, and
// one that begins while the other is under way first waits until it holds half of all slots
// (fetchFree), as on a single queue of one shard; only then does it take the turn. A shard's acks
// ride with its fetches while it is in the turns (mshard.ride), and go out by its acker while it
// is idle.
func (p *runner) runMulti(ctx, handlerCtx context.Context, units chan []*job) {
	k := &picker{changed: make(chan struct{})}
	var waiters []*waiter
	for _, src := range p.sources {
		ms := &msource{src: src, weight: float64(max(src.Weight, 1))}
		for _, eng := range src.Engines {
			sh := &mshard{eng: eng, src: ms, acks: p.acks[eng]}
			sh.ride(true) // ready: every shard is fetched first
			for _, w := range waiters {
				if engine.CanWaitTogether(w.shards[0].eng, eng) {
					sh.w = w
					break
				}
			}
			if sh.w == nil {
				sh.w = &waiter{poked: make(chan struct{}, 1)}
				waiters = append(waiters, sh.w)
			}
			sh.w.shards = append(sh.w.shards, sh)
			ms.shards = append(ms.shards, sh)
		}
		k.sources = append(k.sources, ms)
	}
	p.multi = true
	overlap := &shardFetchers{}
	var wg sync.WaitGroup
	for _, w := range waiters {
		wg.Go(func() { p.waiterRun(ctx, k, w) })
	}
	for range 2 {
		wg.Go(func() { p.multiFetchLoop(ctx, handlerCtx, units, k, overlap) })
	}
	wg.Wait()
	// No fetch comes any more: the acker sends every shard's acks.
	for _, s := range k.sources {
		for _, sh := range s.shards {
			sh.ride(false)
		}
	}
}

// multiFetchLoop is one fetcher of a pool over several queues (runMulti).
func (p *runner) multiFetchLoop(ctx, handlerCtx context.Context, units chan []*job, k *picker, overlap *shardFetchers) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.slots:
		}
		// The slots first, then the turn: the queue whose turn it is gets the fetch, whatever its
		// size. Taking the turn first would give it to the fetcher that came with one slot, and
		// the big fetch of the other fetcher, which gathers half of the slots meanwhile, to the
		// queues after it: the queue at the front of the turns would get one task a fetch and
		// fall behind its share for good.
		n := 1 + p.grabSlots(cap(p.slots)-1)
		if other := overlap.begin(); other != nil {
			n = p.waitSlots(ctx, other, n)
		}
		sh := k.take(ctx)
		if sh == nil {
			for range n {
				p.slots <- struct{}{}
			}
			overlap.end()
			return
		}
		ds, nextDue, err := p.fetch(ctx, sh.eng, n)
		for i := len(ds); i < n; i++ {
			p.slots <- struct{}{}
		}
		overlap.end()
		if err != nil && ctx.Err() != nil {
			k.fetched(sh, 0, -1, nil)
			return
		}
		if err != nil {
			p.log(sh.eng).Error("fetch failed; retrying", "err", err)
		}
		k.fetched(sh, len(ds), nextDue, err)
		if len(ds) == 0 {
			continue
		}
		engs := make([]*engine.Engine, len(ds))
		for i := range engs {
			engs[i] = sh.eng
		}
		for _, u := range p.group(ds, engs, handlerCtx) {
			p.dispatch(u, units)
		}
	}
}
