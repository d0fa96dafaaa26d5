package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BackendEnv names the environment variable that picks the Redis of Start and Shared:
// "embedded" for the embedded Redis even when a redis-server is installed (and REDIS_URL set),
// "redis-server" for a redis-server process even when CI is unset (a missing binary then fails
// the tests), unset for the default described in the package doc.
const BackendEnv = "SRQ_TEST_BACKEND"

// backend is the choice BackendEnv, CI and PATH make for the whole test binary.
type backend struct {
	embedded bool
	forced   bool   // BackendEnv asked for the embedded Redis
	why      string // why the embedded Redis, for skip messages and Main's summary
	err      error  // no usable choice: a bad BackendEnv, or no redis-server where one is required
}

var chosen = sync.OnceValue(func() backend {
	switch v := os.Getenv(BackendEnv); v {
	case "embedded":
		return backend{embedded: true, forced: true, why: BackendEnv + "=embedded"}
	case "redis-server", "":
		if _, err := exec.LookPath("redis-server"); err != nil {
			if v == "" && os.Getenv("CI") == "" {
				return backend{embedded: true, why: "no redis-server on PATH"}
			}
			return backend{err: fmt.Errorf("redistest: no redis-server on PATH (%s=%q, CI=%q): %w; "+
				"install redis-server, or set %s=embedded", BackendEnv, v, os.Getenv("CI"), err, BackendEnv)}
		}
		return backend{}
	default:
		return backend{err: fmt.Errorf("redistest: %s=%q: want embedded, redis-server or nothing", BackendEnv, v)}
	}
})

// Embedded reports whether Start gives tests the embedded Redis in this test binary: BackendEnv
// asks for it, or no redis-server is on PATH and CI is unset. Shared gives the embedded Redis too,
// unless REDIS_URL names a server and BackendEnv does not ask for the embedded one.
func Embedded() bool { return chosen().embedded }

// ranSmall and skipped are what Main's summary counts: the tests that ran at a smaller size on
// the embedded Redis (Size), and the tests skipped for the want of a redis-server (Skip), by
// reason. Each holds test names, so a test is counted once.
var summary struct {
	sync.Mutex
	ranSmall map[string]bool
	skipped  map[string]map[string]bool // reason → test names
}

// count records name under reason in m, creating the maps on first use.
func countTest(reason, name string) {
	summary.Lock()
	defer summary.Unlock()
	if summary.skipped == nil {
		summary.skipped = map[string]map[string]bool{}
	}
	if summary.skipped[reason] == nil {
		summary.skipped[reason] = map[string]bool{}
	}
	summary.skipped[reason][name] = true
}

// Skip skips tb, which cannot run here because of reason (such as "no redis-cli on PATH"),
// logging why it would need what is missing; Main counts it in the line it prints at the end, so
// that a run without -v says that tests did not run. Skip does not return, like tb.Skip.
func Skip(tb testing.TB, reason, why string) {
	tb.Helper()
	countTest(reason, tb.Name())
	tb.Skipf("skipped: %s; this test needs %s", reason, why)
}

// embeddedReason is the reason Skip gives for a test that needs a redis-server on the embedded
// Redis, saying how to get one.
func embeddedReason() string {
	return "on the embedded Redis (" + chosen().why + "; install redis-server, or set " + BackendEnv +
		"=redis-server or REDIS_URL, to run it)"
}

// NeedReal skips tb, counted as Skip does, when s is the embedded Redis; why says what the test
// needs a redis-server for.
func (s *Server) NeedReal(tb testing.TB, why string) {
	tb.Helper()
	if !s.Real() {
		Skip(tb, embeddedReason(), "a real redis-server: "+why)
	}
}

// Size returns n, the size of a test's workload on a real Redis, or small on the embedded one,
// which runs every script in Go in the test process (under -race, tens of times slower than
// redis-server) behind one lock for all the tests of the binary. On the embedded Redis it logs
// both sizes on tb, and Main counts tb as run smaller. Use it where a size (tasks, steps) exists
// to make the test thorough, not where the size is the point of the test.
func (s *Server) Size(tb testing.TB, n, small int) int {
	tb.Helper()
	if s.Real() || small >= n {
		return n
	}
	tb.Logf("on the embedded Redis (%s): size %d instead of %d", s.why(), small, n)
	summary.Lock()
	defer summary.Unlock()
	if summary.ranSmall == nil {
		summary.ranSmall = map[string]bool{}
	}
	summary.ranSmall[tb.Name()] = true
	return small
}

// Size is Shared(tb).Size: n on a real shared Redis, small on the embedded one.
func Size(tb testing.TB, n, small int) int {
	tb.Helper()
	return Shared(tb).Size(tb, n, small)
}

// why says why s is the embedded Redis.
func (s *Server) why() string {
	if w := chosen().why; w != "" {
		return w
	}
	return "chosen by the test"
}

// summaryLines returns the lines Main prints about the tests that did not run, or ran smaller,
// for want of a redis-server; pkg names the package.
func summaryLines(pkg string) []string {
	summary.Lock()
	defer summary.Unlock()
	var lines []string
	reasons := make([]string, 0, len(summary.skipped))
	for r := range summary.skipped {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		lines = append(lines, fmt.Sprintf("%s: %s: %d %s skipped (go test -v says which)", pkg, r,
			len(summary.skipped[r]), plural(len(summary.skipped[r]), "test")))
	}
	if n := len(summary.ranSmall); n > 0 {
		lines = append(lines, fmt.Sprintf("%s: on the embedded Redis (%s): %d %s ran at a smaller size (go test -v says which)",
			pkg, chosen().why, n, plural(n, "test")))
	}
	return lines
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// packagePath returns the import path of the package under test, from the test binary's build
// information ("<import path>.test"), or the binary's name.
func packagePath() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return strings.TrimSuffix(os.Args[0], ".test")
}

// quietLogger drops go-redis's log lines: its failed dials ("dial tcp …", with a file and line of
// go-redis) while a test has Redis down on purpose, which the test's own checks report.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// silenceGoRedis sets go-redis's global logger to one that drops every line.
func silenceGoRedis() { redis.SetLogger(quietLogger{}) }
