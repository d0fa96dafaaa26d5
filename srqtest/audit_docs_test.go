package srqtest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/srqueue/srq/srqtest"
)

// TestNewRedisReadsREDIS_URLAsConnectDoes: NewRedis uses the server REDIS_URL names, given as a
// URL or as a bare host:port, as devredis.Connect reads it (docs/getting-started.md): the key a
// test writes lands on that server, not on an embedded Redis of NewRedis's own. Not parallel: it
// sets REDIS_URL for the process.
func TestNewRedisReadsREDIS_URLAsConnectDoes(t *testing.T) {
	m := miniredis.RunT(t) // the test's own server: never one at a fixed address
	for _, url := range []string{m.Addr(), "redis://" + m.Addr() + "/0"} {
		t.Run(url, func(t *testing.T) {
			t.Setenv("REDIS_URL", url)
			c := srqtest.NewRedis(t)
			key := "srqtest-url-" + url
			if err := c.Set(context.Background(), key, "here", 0).Err(); err != nil {
				t.Fatalf("REDIS_URL=%s: %v", url, err)
			}
			if got, err := m.Get(key); err != nil || got != "here" {
				t.Fatalf("REDIS_URL=%s: the key is %q on its server (%v): NewRedis used another", url, got, err)
			}
		})
	}
}

// TestNewRedisRefusesABadREDIS_URL: a REDIS_URL that does not parse fails the test, with the form
// wanted.
func TestNewRedisRefusesABadREDIS_URL(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://localhost:notaport")
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends this goroutine, as it would the test's
		defer close(done)
		srqtest.NewRedis(tb)
	}()
	<-done
	if !strings.Contains(tb.fatal, "REDIS_URL") || !strings.Contains(tb.fatal, "host:port") {
		t.Fatalf("NewRedis with a bad REDIS_URL failed with %q, want one naming REDIS_URL and the form wanted", tb.fatal)
	}
}

// fatalTB records the message of Fatalf instead of failing the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (tb *fatalTB) Fatalf(format string, args ...any) {
	tb.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
