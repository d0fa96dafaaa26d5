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

// relayer is a shard's relay loop as upkeepLoop drives it.
type relayer struct {
	kick    chan struct{} // a probe found messages in the outbox or an abandoned flow publish
	flows   atomic.Bool   // undo abandoned flow publishes before the next relay
	failing atomic.Int64  // unix ns of the last failed relay; 0 after a success
}

// upkeepLoop probes every shard at once and then every min(PollWait, RecoverInterval), sooner
// when a schedule is due sooner, and does what each probe found due: Recover where a lease
// expired or recovery's upkeep is due, FireSchedules where a schedule is due, Relay (and
// RecoverFlows) where the outbox has messages or a flow publish was abandoned. Each shard's
// relays run on a loop of their own, which also relays at once when a call of this worker wrote
// to the outbox (engine.RelayDue). Errors are logged; it ends when ctx does.
func (p *runner) upkeepLoop(ctx context.Context) error {
	relayers := map[*engine.Engine]*relayer{}
	recovered := map[*engine.Engine]time.Time{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, eng := range p.engines {
		rl := &relayer{kick: make(chan struct{}, 1)}
		relayers[eng] = rl
		wg.Go(func() { p.relayOn(ctx, eng, rl) })
	}
	every := min(p.cfg.PollWait, p.cfg.RecoverInterval)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		t.Reset(p.upkeep(ctx, relayers, recovered, every))
	}
}

// upkeep probes every shard once, does what is due, and returns how long to wait for the next
// probe; recovered holds when each shard's recovery last began, which upkeep updates: at most every, less when a schedule is due sooner (a millisecond past its due time, so
// the server's clock has reached it too).
func (p *runner) upkeep(ctx context.Context, relayers map[*engine.Engine]*relayer, recovered map[*engine.Engine]time.Time,
	every time.Duration) time.Duration {
	dues, err := engine.Probe(ctx, p.engines, flowPublishTimeout)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Error("srq: probe for due work failed", "err", err)
		}
		return every
	}
	var (
		mu   sync.Mutex
		next = every
		wg   sync.WaitGroup
	)
	soon := func(d time.Duration) {
		mu.Lock()
		next = min(next, d+time.Millisecond)
		mu.Unlock()
	}
	for i, d := range dues {
		eng := p.engines[i]
		if d.NextSchedule >= 0 {
			soon(d.NextSchedule)
		}
		// Keys to convert alone call for a recovery no more often than RecoverInterval: on a
		// server where the conversion does nothing they are found every time.
		if d.Expired || d.Upkeep || (d.Convert && time.Since(recovered[eng]) >= p.cfg.RecoverInterval) {
			recovered[eng] = time.Now()
			wg.Go(func() { p.recoverOnce(ctx, eng) })
		}
		if d.Schedules {
			wg.Go(func() {
				s := p.srcOf[eng]
				wait, _, err := FireShards(ctx, s.Name, []*engine.Engine{eng}, s.log)
				if err != nil && ctx.Err() == nil {
					s.log.Error("srq: fire schedules", "err", err)
					return
				}
				soon(wait)
			})
		}
		rl := relayers[eng]
		// A relay that failed is tried again by the probes no more often than RecoverInterval.
		retry := rl.failing.Load() == 0 || time.Since(time.Unix(0, rl.failing.Load())) >= p.cfg.RecoverInterval
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
	wg.Wait()
	return next
}

// relayOn relays eng's outbox when a call of this worker wrote to it (engine.RelayDue) and when
// upkeep kicks rl, undoing abandoned flow publishes first when rl says so, until ctx ends.
func (p *runner) relayOn(ctx context.Context, eng *engine.Engine, rl *relayer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-eng.RelayDue():
		case <-rl.kick:
		}
		if rl.flows.Swap(false) {
			p.recoverFlows(ctx, eng)
		}
		if p.relay(ctx, eng) {
			rl.failing.Store(0)
		} else {
			rl.failing.Store(time.Now().UnixNano())
		}
	}
}
