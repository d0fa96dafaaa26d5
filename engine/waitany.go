package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// CanWaitTogether says whether WaitAny can wait for a and b in one blocking call: they run on one
// client, and that client sends a command over several keys to one server. A single-node or
// Sentinel client (*redis.Client) can, for any queues; on a Cluster or Ring client the wake-up
// lists of two queues live in different slots, so each queue needs its own wait.
func CanWaitTogether(a, b *Engine) bool {
	if a == b {
		return true
	}
	if a.client != b.client {
		return false
	}
	_, single := a.client.(*redis.Client)
	return single
}

// WaitAny blocks in Redis until a publish or a release makes work ready in the queue of one of
// engs, d passes, or ctx ends: one blocking pop over the wake-up lists of them all, in slices of
// at most the first engine's MaxBlock. It returns the index in engs of the engine whose wake-up
// token it took (a caller that cannot fetch now should hand it on with that engine's Wake), or -1
// when d passed. Every pair of engs must pass CanWaitTogether. It fails with ErrInvalid for no
// engines or engines that cannot be waited for together, with ctx's error when ctx ends, and with
// Redis's error.
func WaitAny(ctx context.Context, engs []*Engine, d time.Duration) (int, error) {
	if len(engs) == 0 {
		return -1, invalidf("WaitAny: no engines")
	}
	keys := make([]string, len(engs))
	for i, e := range engs {
		if !CanWaitTogether(engs[0], e) {
			return -1, invalidf("WaitAny: queues %s and %s cannot be waited for in one call", engs[0].cfg.Queue, e.cfg.Queue)
		}
		keys[i] = e.keys.Wake()
	}
	first := engs[0]
	end := time.Now().Add(d)
	for {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		block := min(time.Until(end), first.cfg.MaxBlock)
		if dl, ok := ctx.Deadline(); ok {
			block = min(block, time.Until(dl))
		}
		if block <= 0 {
			return -1, nil
		}
		key, err := first.blockPopAny(ctx, keys, block)
		if err != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("srq: wait for work: %w", err)
			}
			return -1, err
		}
		if key == "" {
			continue
		}
		for i, k := range keys {
			if k == key {
				return i, nil
			}
		}
		return -1, fmt.Errorf("srq: wait for work: Redis popped from %q, not one of the keys waited on", key)
	}
}

// blockPopAny pops an element of the first of keys that has one, waiting for one for at most d
// (as blockPop), and returns that key, or "" when d passed. It fails with ctx's error when ctx
// ended, else with Redis's.
func (e *Engine) blockPopAny(ctx context.Context, keys []string, d time.Duration) (string, error) {
	var (
		got []string
		err error
	)
	if d >= time.Second {
		got, err = e.client.BLPop(ctx, d.Truncate(time.Second), keys...).Result()
	} else {
		if e.shortBlockCap > 0 {
			d = min(d, e.shortBlockCap)
		}
		args := make([]any, 0, len(keys)+2)
		args = append(args, "blpop")
		for _, k := range keys {
			args = append(args, k)
		}
		args = append(args, strconv.FormatFloat(max(d.Seconds(), 0.001), 'f', 3, 64))
		got, err = e.client.Do(ctx, args...).StringSlice()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", ctxErr
		}
		return "", err
	case len(got) != 2:
		return "", fmt.Errorf("srq: blpop answered %d elements, want 2", len(got))
	}
	return got[0], nil
}
