// Package devredis gives programs that try srq a Redis: the server REDIS_URL names, or an embedded,
// in-process one (github.com/alicebob/miniredis/v2) when it is unset. For examples, demos and local
// experiments: the embedded Redis keeps everything in memory, in the process that started it. Tests
// want package srqtest instead, which also starts a real redis-server when one is installed.
package devredis

import (
	"fmt"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Connect returns a client of REDIS_URL's server, or of an embedded Redis started here; where
// says which, and stop closes the client (and the embedded server).
func Connect() (c redis.UniversalClient, where string, stop func(), err error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rc := redis.NewClient(opt)
		return rc, url, func() { _ = rc.Close() }, nil
	}
	rc, stop, err := Embedded()
	if err != nil {
		return nil, "", nil, err
	}
	return rc, "embedded (set REDIS_URL to use a real server)", stop, nil
}

// Embedded starts an embedded Redis of its own, for a runnable example whose printed output must
// not depend on what a shared server holds, and returns a client of it; stop closes both.
func Embedded() (c *redis.Client, stop func(), err error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rc, func() { _ = rc.Close(); m.Close() }, nil
}

// MustEmbedded is Embedded for an example's first line: it panics when the embedded Redis cannot
// start, which only a broken machine makes it do.
func MustEmbedded() (c *redis.Client, stop func()) {
	c, stop, err := Embedded()
	if err != nil {
		panic(err)
	}
	return c, stop
}
