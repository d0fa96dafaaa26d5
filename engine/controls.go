package engine

import (
	"context"
	"fmt"

	"github.com/srqueue/srq/partition"
)

// Pause stops partition p from handing out work until Resume. Its pending and leased tasks stay as
// they are; new tasks are still accepted. The pause lasts until Resume, across restarts. It fails
// with ErrInvalid for an invalid key, and with the context's or Redis's error.
func (e *Engine) Pause(ctx context.Context, p partition.Key) error {
	return e.setPaused(ctx, p, true)
}

// Resume lets a paused partition hand out work again; resuming one that is not paused does nothing.
// It fails as Pause does.
func (e *Engine) Resume(ctx context.Context, p partition.Key) error {
	return e.setPaused(ctx, p, false)
}

func (e *Engine) setPaused(ctx context.Context, p partition.Key, paused bool) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	flag := 0
	if paused {
		flag = 1
	}
	_, err := e.run(ctx, scriptSetPaused, string(p), flag)
	return err
}

// SetConcurrency limits how many tasks of unordered partition p may be leased at once; 0 removes
// the limit. Tasks leased before the limit was set do not count against it. It fails with
// ErrInvalid for an invalid key, an ordered partition (always one consumer at a time) or a negative
// limit, and with the context's or Redis's error.
func (e *Engine) SetConcurrency(ctx context.Context, p partition.Key, limit int) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if p.IsOrdered() {
		return invalidf("partition %q is ordered: its concurrency is always 1", string(p))
	}
	if limit < 0 {
		return invalidf("negative concurrency limit %d", limit)
	}
	_, err := e.run(ctx, scriptSetLimit, string(p), limit)
	return err
}
