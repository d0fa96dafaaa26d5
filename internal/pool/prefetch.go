package pool

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// prefetchRoundTrips is how many fetch round trips of work an adaptive prefetch keeps at hand:
// with two fetchers, one call travels while the other's tasks are handed out, so the handlers
// stay busy when the tasks held cover about two round trips of their work.
const prefetchRoundTrips = 2

// prefetchWeight is the weight of the newest measurement in the moving averages of the handlers'
// rate and the fetches' round trip.
const prefetchWeight = 0.25

// prefetchIdle is a pause between two fetches that brought tasks after which the handlers' rate
// is measured afresh rather than averaged: work that comes after an idle spell starts with the
// small prefetch, so a burst is shared with the other workers instead of held by this one.
const prefetchIdle = time.Second

// prefetcher sizes an adaptive prefetch (Config.PrefetchMax above Config.Prefetch): the worker
// holds up to Concurrency + w tasks, where w is what its handlers finish in prefetchRoundTrips
// fetch round trips, kept between Prefetch and PrefetchMax. Fast handlers thus get few, large
// calls (the cost of a call, in Redis and in the client, is mostly fixed); slow ones keep the
// small prefetch, so tasks do not wait in this worker while another is idle.
//
// The worker's slots channel has room for Concurrency + PrefetchMax slots; the prefetcher keeps
// PrefetchMax - w of them out of circulation (withheld), putting them in when w grows and keeping
// slots that come back from handlers when it shrinks (owed), so the fetchers, which take what
// slots are free, hold no more than Concurrency + w tasks.
type prefetcher struct {
	lo, hi int
	slots  chan struct{}
	w      atomic.Int64 // the prefetch now
	done   atomic.Int64 // handlers finished so far
	owing  atomic.Bool  // owed > 0: give takes the lock

	mu       sync.Mutex
	withheld int     // slots out of circulation
	owed     int     // slots to take out of circulation as they come back
	rate     float64 // tasks a second the handlers finish, moving average
	rtt      float64 // seconds a fetch takes, moving average
	last     time.Time
	lastDone int64
}

// newPrefetcher returns a prefetcher between lo and hi, starting at lo, over slots, of which
// hi - lo are not in circulation yet.
func newPrefetcher(lo, hi int, slots chan struct{}) *prefetcher {
	f := &prefetcher{lo: lo, hi: hi, slots: slots, withheld: hi - lo}
	f.w.Store(int64(lo))
	return f
}

// prefetch is the prefetch now.
func (f *prefetcher) prefetch() int { return int(f.w.Load()) }

// give counts a handler that returned and takes back its slot: out of circulation while slots
// are owed, else into the slots channel.
func (f *prefetcher) give() {
	f.done.Add(1)
	if f.owing.Load() {
		f.mu.Lock()
		if f.owed > 0 {
			f.owed--
			f.withheld++
			f.owing.Store(f.owed > 0)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
	f.slots <- struct{}{}
}

// fetched takes in a fetch that started at start and brought tasks at now, and sizes the prefetch
// anew. A fetch that found nothing says nothing of the handlers' speed and is not passed.
func (f *prefetcher) fetched(start, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	done := f.done.Load()
	if !f.last.IsZero() {
		switch dt := now.Sub(f.last); {
		case dt > prefetchIdle:
			f.rate = float64(done-f.lastDone) / dt.Seconds()
		case dt > 0:
			f.rate = avg(f.rate, float64(done-f.lastDone)/dt.Seconds())
		}
	}
	f.last, f.lastDone = now, done
	f.rtt = avg(f.rtt, now.Sub(start).Seconds())
	w := min(max(int(math.Ceil(prefetchRoundTrips*f.rate*f.rtt)), f.lo), f.hi)
	f.w.Store(int64(w))

	// Out of circulation there should be hi - w slots: owe more, or cancel debts and put in.
	want, have := f.hi-w, f.withheld+f.owed
	if want > have {
		f.owed += want - have
	} else if want < have {
		d := have - want
		c := min(d, f.owed)
		f.owed -= c
		d -= c
		f.withheld -= d
		for range d {
			f.slots <- struct{}{} // never blocks: the channel has room for every slot
		}
	}
	f.owing.Store(f.owed > 0)
}

// avg moves the average a toward the measurement x (a itself when a is still 0, the first).
func avg(a, x float64) float64 {
	if a == 0 {
		return x
	}
	return a + prefetchWeight*(x-a)
}
