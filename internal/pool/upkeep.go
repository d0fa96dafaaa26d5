package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
)

// The background work of a Run (returning expired leases, firing schedules, relaying flow
// outboxes, undoing abandoned flow publishes) goes, where every shard's keys are on one server,
// by one probe over every shard (engine.Probe): a read-only call that says what is due where, so
// an idle worker makes one call a round however many queues it serves, and the calls that do the
// work go only to the shards that have some. On a Cluster or Ring client, where the queues' keys
// live in different slots and no one call can read them all, each shard keeps loops of its own
// (recoverLoop, relayLoop, runSchedules).

// probes says whether the runner's background work goes by engine.Probe: every shard can be
// probed together with the first.
func (p *runner) probes() bool {
	for _, e := range p.engines {
		if !engine.CanProbeTogether(p.engines[0], e) {
			return false
		}
	}
	return true
}

// upkeeper is one upkeepLoop's state.
type upkeeper struct {
	relayers   map[*engine.Engine]*relayer
	recovered  map[*engine.Engine]time.Time // when each shard's last recovery began; the loop's own
	recovering map[*engine.Engine]*atomic.Bool
	firing     map[*engine.Engine]*atomic.Bool
	work       sync.WaitGroup // the recoveries and firings under way

	mu     sync.Mutex
	nextAt time.Time     // when the next probe is due
	poke   chan struct{} // nextAt moved closer
}

// sooner moves the next probe to d from now, if that is sooner, a millisecond past it so that the
// server's clock has reached it too.
func (u *upkeeper) sooner(d time.Duration) {
	at := time.Now().Add(d + time.Millisecond)
	u.mu.Lock()
	moved := at.Before(u.nextAt)
	if moved {
		u.nextAt = at
	}
	u.mu.Unlock()
	if moved {
		select {
		case u.poke <- struct{}{}:
		default:
		}
	}
}

// upkeepLoop probes every shard at once and then every min(PollWait, RecoverInterval), sooner
// when a schedule is due sooner, and starts what each probe found due: Recover where a lease
// expired or recovery's upkeep is due, FireSchedules where a schedule is due, Relay (and
// RecoverFlows) where the outbox has messages or a flow publish was abandoned. The work runs
// beside the probes, at most one recovery and one firing per shard at a time, so a shard whose
// work is slow holds up neither the others' nor the probes. Each shard's relays run on a loop of
// their own, which also relays at once when a call of this worker wrote to the outbox
// (engine.RelayDue). Errors are logged; it ends, once its work has, when ctx does.
func (p *runner) upkeepLoop(ctx context.Context) error {
	u := &upkeeper{relayers: map[*engine.Engine]*relayer{}, recovered: map[*engine.Engine]time.Time{},
		recovering: map[*engine.Engine]*atomic.Bool{}, firing: map[*engine.Engine]*atomic.Bool{},
		poke: make(chan struct{}, 1)}
	defer u.work.Wait()
	for _, eng := range p.engines {
		rl := &relayer{kick: make(chan struct{}, 1)}
		u.relayers[eng] = rl
		u.recovering[eng], u.firing[eng] = &atomic.Bool{}, &atomic.Bool{}
		u.work.Go(func() { p.relayOn(ctx, eng, rl, nil) })
	}
	every := min(p.cfg.PollWait, p.cfg.RecoverInterval)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-u.poke:
			u.mu.Lock()
			t.Reset(time.Until(u.nextAt))
			u.mu.Unlock()
			continue
		case <-t.C:
		}
		u.mu.Lock()
		u.nextAt = time.Now().Add(every)
		u.mu.Unlock()
		p.upkeep(ctx, u)
		u.mu.Lock()
		t.Reset(time.Until(u.nextAt))
		u.mu.Unlock()
	}
}

// upkeep probes every shard once and starts what is due; a probe that fails is logged, and the
// next one comes after the usual wait.
func (p *runner) upkeep(ctx context.Context, u *upkeeper) {
	dues, err := engine.Probe(ctx, p.engines, flowPublishTimeout)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Error("srq: probe for due work failed", "err", err)
		}
		return
	}
	for i, d := range dues {
		eng := p.engines[i]
		if d.NextSchedule >= 0 {
			u.sooner(d.NextSchedule)
		}
		// Keys to convert alone call for a recovery no more often than RecoverInterval: on a
		// server where the conversion does nothing they are found every time.
		due := d.Expired || d.Upkeep || (d.Convert && time.Since(u.recovered[eng]) >= p.cfg.RecoverInterval)
		if due && u.recovering[eng].CompareAndSwap(false, true) {
			u.recovered[eng] = time.Now()
			u.work.Go(func() {
				defer u.recovering[eng].Store(false)
				p.recoverOnce(ctx, eng)
			})
		}
		if d.Schedules && u.firing[eng].CompareAndSwap(false, true) {
			u.work.Go(func() {
				defer u.firing[eng].Store(false)
				s := p.srcOf[eng]
				wait, _, err := FireShards(ctx, s.Name, []*engine.Engine{eng}, s.log)
				if err != nil {
					if ctx.Err() == nil {
						s.log.Error("srq: fire schedules", "err", err)
					}
					return
				}
				u.sooner(wait)
			})
		}
		rl := u.relayers[eng]
		// A relay that failed is tried again by the probes no more often than RecoverInterval.
		failed := rl.failing.Load()
		retry := failed == 0 || time.Since(time.Unix(0, failed)) >= p.cfg.RecoverInterval
		if d.AbandonedFlows || (d.Outbox > 0 && retry) {
			if d.AbandonedFlows {
				rl.flows.Store(true)
			}
			select {
			case rl.kick <- struct{}{}:
			default:
			}
		}
	}
}
