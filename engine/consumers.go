package engine

import (
	"context"
	"fmt"
)

// Leave takes consumer out of the shard's list of consumers seen recently (Keys.Consumers), so
// Overview, inspect, the srq command and the dashboard stop listing it as soon as it stopped
// instead of for ConsumerLive after its last fetch or extension. A worker calls it when its Run
// returns. A consumer that fetches or extends a lease again is listed again, and so is another
// process running under the same consumer id, at its next fetch. One command; it fails with the
// context's or Redis's error, after which the consumer ages out as if it had not left.
func (e *Engine) Leave(ctx context.Context, consumer string) error {
	if err := e.client.ZRem(ctx, e.keys.Consumers(), consumer).Err(); err != nil {
		return fmt.Errorf("srq: leave the consumers of %s: %w", e.cfg.Queue, err)
	}
	return nil
}
