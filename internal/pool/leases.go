package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/srqueue/srq/engine"
)

// extendLoop extends the leases of every held task every Lease/3, one call per shard, each shard
// on a loop of its own. A task whose lease is refused has its context cancelled with p.cfg.LeaseLost;
// one whose lease cannot be extended in time (Redis unreachable) is cancelled by its timer at the
// deadline. A loop per shard, because a node that does not answer holds its call up to the
// client's timeouts, which may be longer than what is left of the other shards' leases; each
// loop's ticker keeps one tick while its call runs, so a slow call is followed by the next at once.
func (p *runner) extendLoop(ctx context.Context) error {
	return p.perShard(func(eng *engine.Engine) { p.extendShard(ctx, eng) })
}

// perShard runs loop for every shard, each on a goroutine of its own, until all have returned.
func (p *runner) perShard(loop func(*engine.Engine)) error {
	var wg sync.WaitGroup
	for _, eng := range p.engines {
		wg.Go(func() { loop(eng) })
	}
	wg.Wait()
	return nil
}

// extendShard extends the leases of the tasks of eng's shard every Lease/3 until ctx ends.
func (p *runner) extendShard(ctx context.Context, eng *engine.Engine) {
	t := time.NewTicker(p.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var js []*job
		p.mu.Lock()
		for j := range p.jobs {
			if j.eng == eng {
				js = append(js, j)
			}
		}
		p.mu.Unlock()
		if len(js) > 0 {
			p.extend(ctx, eng, js)
		}
	}
}

// extend extends the leases of jobs of one shard, in chunks of 500.
func (p *runner) extend(ctx context.Context, eng *engine.Engine, js []*job) {
	for len(js) > 0 {
		chunk := js[:min(len(js), 500)]
		js = js[len(chunk):]
		rs := make([]engine.Receipt, len(chunk))
		for i, j := range chunk {
			rs[i] = j.d.Receipt()
		}
		errs, deadline, err := eng.Extend(ctx, rs, p.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				p.log(eng).Error("lease extension failed", "tasks", len(rs), "err", err)
			}
			continue
		}
		p.mu.Lock()
		for i, j := range chunk {
			if _, ok := p.jobs[j]; !ok {
				continue // settled since the snapshot
			}
			if errors.Is(errs[i], engine.ErrCancelled) {
				j.cancel(engine.ErrCancelled) // the lease was extended: the handler winds down in time
			} else if errs[i] != nil {
				j.cancel(fmt.Errorf("%w: %w", p.cfg.LeaseLost, errs[i]))
				continue
			}
			j.deadline = deadline
			j.timer.Reset(time.Until(deadline))
		}
		p.mu.Unlock()
	}
}

// recoverLoop returns expired leases, of any consumer, every RecoverInterval, each shard on a loop
// of its own, as extendLoop does: a node that does not answer must not hold up the others'
// recovery.
func (p *runner) recoverLoop(ctx context.Context) error {
	return p.perShard(func(eng *engine.Engine) { p.recoverShard(ctx, eng) })
}

// recoverShard returns the expired leases of eng's shard at once and then every RecoverInterval
// until ctx ends.
func (p *runner) recoverShard(ctx context.Context, eng *engine.Engine) {
	t := time.NewTicker(p.cfg.RecoverInterval)
	defer t.Stop()
	for {
		p.recoverOnce(ctx, eng)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recoverOnce returns the expired leases of eng's shard (engine.RecoverAll), logging what it did.
func (p *runner) recoverOnce(ctx context.Context, eng *engine.Engine) {
	r, err := eng.RecoverAll(ctx)
	if err != nil && ctx.Err() == nil {
		p.log(eng).Error("recovery failed", "queue", eng.Config().Queue, "err", err)
	} else if r.Returned+r.DeadLettered > 0 {
		p.log(eng).Info("recovered expired leases", "queue", eng.Config().Queue,
			"returned", r.Returned, "dead_lettered", r.DeadLettered)
	}
}
