package redistest

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// GlobEscape quotes the characters KEYS and SCAN MATCH patterns treat as syntax, so a key prefix
// (which holds '{' and '}' and any byte of a queue name) can be matched literally.
func GlobEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// DropKeys deletes every key that starts with prefix, found by SCAN in batches, and returns the
// first error. Benchmarks and tools use it to remove their own queues; it touches nothing else.
func DropKeys(ctx context.Context, c redis.UniversalClient, prefix string) error {
	iter := c.Scan(ctx, 0, GlobEscape(prefix)+"*", 10000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}
