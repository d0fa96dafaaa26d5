package pool

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/engine"
)

// flowPublishTimeout is how long a flow's publish may take before a worker of its home queue takes
// its publisher as dead and undoes it (engine.RecoverFlows): far longer than any live publish.
const flowPublishTimeout = 5 * time.Minute

// relayLoop relays each shard's flow outbox (engine.Relay): at once when a call of this worker
// wrote to it, and every RecoverInterval for what other processes and operators left there. On
// that tick it also undoes flow publishes whose publisher died. It ends when ctx does.
func (p *runner) relayLoop(ctx context.Context) error {
	return p.perShard(func(eng *engine.Engine) {
		t := time.NewTicker(p.cfg.RecoverInterval)
		defer t.Stop()
		p.relayOn(ctx, eng, &relayer{}, t.C)
	})
}

// relayer is the state of a shard's relay loop (relayOn) that upkeepLoop drives.
type relayer struct {
	kick    chan struct{} // a probe found messages in the outbox or an abandoned flow publish; nil: none come
	flows   atomic.Bool   // undo abandoned flow publishes before the next relay
	failing atomic.Int64  // unix ns of the last failed relay; 0 after a success
}

// relayOn relays eng's outbox when a call of this worker wrote to it (engine.RelayDue), when
// upkeep kicks rl (undoing abandoned flow publishes first when rl says so) and at every tick
// (undoing them first every time; nil: no ticks), until ctx ends.
func (p *runner) relayOn(ctx context.Context, eng *engine.Engine, rl *relayer, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-eng.RelayDue():
		case <-rl.kick:
		case <-tick:
			rl.flows.Store(true)
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

// recoverFlows undoes the flow publishes of eng's shard whose publisher died
// (engine.RecoverFlows), logging what it did.
func (p *runner) recoverFlows(ctx context.Context, eng *engine.Engine) {
	if n, err := eng.RecoverFlows(ctx, flowPublishTimeout); err != nil && ctx.Err() == nil {
		p.log(eng).Error("undoing unfinished flow publishes failed", "queue", eng.Config().Queue, "err", err)
	} else if n > 0 {
		p.log(eng).Warn("undid flow publishes whose publisher died", "queue", eng.Config().Queue, "flows", n)
	}
}

// relay relays eng's outbox once, logging a failure: the messages stay for the next round. It
// says whether the relay succeeded.
func (p *runner) relay(ctx context.Context, eng *engine.Engine) bool {
	if _, err := eng.Relay(ctx); err != nil {
		if ctx.Err() == nil {
			p.log(eng).Error("flow relay failed; retried on the next round", "queue", eng.Config().Queue, "err", err)
		}
		return false
	}
	return true
}

// relayLast relays what the last acks of a Run wrote to the outboxes, once its loops have ended.
func (p *runner) relayLast() {
	ctx, cancel := p.settleCtx(p.base)
	defer cancel()
	_ = p.perShard(func(eng *engine.Engine) {
		select {
		case <-eng.RelayDue():
			p.relay(ctx, eng)
		default:
		}
	})
}
