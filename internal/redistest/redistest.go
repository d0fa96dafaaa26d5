// Package redistest gives tests a Redis: their own redis-server on a free loopback port, the one
// named by REDIS_URL, or an embedded miniredis. It never flushes a server it did not start: tests
// isolate themselves with a unique queue name each (Queue).
//
// The backend. By default tests get a redis-server process (Shared: the server REDIS_URL names,
// when set); when no redis-server is on PATH and CI is unset they fall back to the embedded Redis,
// and under CI a missing redis-server fails them. SRQ_TEST_BACKEND (BackendEnv) forces the choice:
// SRQ_TEST_BACKEND=embedded gives every test the embedded Redis (and starts no redis-server,
// cluster or sentinel, whatever PATH, REDIS_URL and CI say), SRQ_TEST_BACKEND=redis-server
// requires a redis-server process even with CI unset.
//
// On the embedded Redis, a test that needs a redis-server (its statistics, a process to stop, a
// cluster) skips, saying why (StartReal, NeedReal, Skip), and a heavy test runs at a smaller size
// (Size), logging both sizes. Main prints one line for each package where that happened, such as
// "…/faults: on the embedded Redis (no redis-server on PATH; …): 13 tests skipped", so that
// "go test ./..." says what did not run without -v. Main also silences go-redis's logger, whose
// failed dials tests provoke on purpose.
package redistest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/srqueue/srq/devredis"
)

// Kinds of Server.
const (
	KindProcess   = "redis-server" // a redis-server process this package started
	KindURL       = "url"          // the server REDIS_URL names
	KindMiniredis = "miniredis"    // an embedded, in-process server
)

// Server is a Redis for tests.
type Server struct {
	Addr string
	Kind string
	URL  string // the REDIS_URL, for KindURL

	// ExtraArgs were passed to redis-server after the defaults (KindProcess).
	ExtraArgs []string
	Dir       string // the server's working directory (KindProcess)

	cmd      *exec.Cmd
	exited   chan struct{}
	mini     *miniredis.Miniredis
	launcher []string      // a command the server runs under, such as valgrind (StartUnder)
	wait     time.Duration // how long start waits for the first PING answer; 0: 10s
}

// Options returns go-redis options for s.
func (s *Server) Options() *redis.Options {
	if s.Kind == KindURL {
		opt, err := devredis.ParseURL(s.URL) // as the README says REDIS_URL is read: host:port too
		if err == nil {
			return opt
		}
	}
	return &redis.Options{Addr: s.Addr}
}

// Client returns a new client for s, closed when tb ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientWith returns a new client for s with its options changed by tweak, closed when tb ends.
func (s *Server) ClientWith(tb testing.TB, tweak func(*redis.Options)) *redis.Client {
	tb.Helper()
	opt := s.Options()
	tweak(opt)
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Real reports whether s is a real Redis (not the embedded one).
func (s *Server) Real() bool { return s.Kind != KindMiniredis }

// StartProcess starts a redis-server on a free loopback port in a new temporary directory, with no
// persistence unless args ask for it; args are appended to the command line. It fails when no
// redis-server binary is on PATH (with an error wrapping exec.ErrNotFound), and when BackendEnv
// asks for the embedded Redis.
func StartProcess(args ...string) (*Server, error) {
	if chosen().forced {
		return nil, fmt.Errorf("redistest: %s=embedded: no redis-server is started", BackendEnv)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server on PATH: %w", err)
	}
	return StartUnder(nil, bin, 0, args...) // 0: start waits its default 10s
}

// StartUnder starts the redis-server binary bin as StartProcess does, run by launcher (a command
// and its options, such as valgrind's), and waits up to wait for it to answer: a launcher can
// make the start take seconds.
func StartUnder(launcher []string, bin string, wait time.Duration, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "srq-redis-*")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Kind: KindProcess,
			ExtraArgs: args, Dir: dir, launcher: launcher, wait: wait}
		if lastErr = s.start(bin); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

func (s *Server) start(bin string) error {
	_, port, _ := net.SplitHostPort(s.Addr)
	argv := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.Dir, "--logfile", filepath.Join(s.Dir, "redis.log")}, s.ExtraArgs...)
	argv = append([]string{bin}, argv...)
	if len(s.launcher) > 0 {
		argv = append(slices.Clone(s.launcher), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	setDeathSignal(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd = cmd
	wait := cmp.Or(s.wait, 10*time.Second) // servers made elsewhere (cluster nodes) leave it 0
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			logTail, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server exited at start: %s %s", stderr.String(), tail(logTail))
		default:
		}
		if ping(s.Addr) == nil {
			s.exited = exited
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redistest: redis-server did not answer PING within %v", wait)
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func ping(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// FreePort returns a loopback TCP port that was free a moment ago, for a server about to start.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Pid returns the process id of a server this package started (of its launcher, with StartUnder);
// 0 for any other kind.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Signal sends sig to the redis-server process (KindProcess only): SIGSTOP and SIGCONT to make it
// unresponsive and back, SIGKILL to crash it.
func (s *Server) Signal(sig os.Signal) error {
	if s.cmd == nil {
		return fmt.Errorf("redistest: %s server has no process to signal", s.Kind)
	}
	return s.cmd.Process.Signal(sig)
}

// Stop ends the server and removes its directory. Safe to call twice.
func (s *Server) Stop() {
	switch {
	case s.mini != nil:
		s.mini.Close()
	case s.cmd != nil:
		_ = s.cmd.Process.Kill()
		<-s.exited
		_ = os.RemoveAll(s.Dir)
	}
}

// Start gives tb a Redis of its own, stopped when tb ends: a new redis-server, or the embedded one
// (see the package doc for the choice). It fails tb when the chosen backend cannot start.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	var s *Server
	var err error
	switch b := chosen(); {
	case b.err != nil:
		err = b.err
	case b.embedded:
		s, err = startEmbedded()
	default:
		s, err = StartProcess(args...)
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// startEmbedded starts an embedded Redis.
func startEmbedded() (*Server, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("start miniredis: %w", err)
	}
	return &Server{Addr: m.Addr(), Kind: KindMiniredis, mini: m}, nil
}

// StartReal is Start for a test that needs a redis-server process (its statistics, its blocked
// clients, a process to stop): on the embedded Redis it skips tb, saying why it needs one, and
// counts it in Main's summary.
func StartReal(tb testing.TB, why string, args ...string) *Server {
	tb.Helper()
	s := Start(tb, args...)
	s.NeedReal(tb, why)
	return s
}

// SharedReal is Shared for a test that needs a real Redis: on the embedded one it skips tb as
// StartReal does.
func SharedReal(tb testing.TB, why string) *Server {
	tb.Helper()
	s := Shared(tb)
	s.NeedReal(tb, why)
	return s
}

var shared struct {
	sync.Mutex
	s   *Server
	err error
}

// Shared returns the Redis the whole test binary shares: the embedded one when BackendEnv asks
// for it, else the one REDIS_URL names, else a redis-server started on first use and stopped by
// Main, else (no binary, CI unset) the embedded one. Tests on it isolate themselves with Queue;
// none may flush it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = startShared()
	}
	if shared.err != nil {
		tb.Fatalf("redistest: %v", shared.err)
	}
	return shared.s
}

func startShared() (*Server, error) {
	b := chosen()
	if url := os.Getenv("REDIS_URL"); url != "" && !b.forced {
		opt, err := devredis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return &Server{Addr: opt.Addr, Kind: KindURL, URL: url}, nil
	}
	switch {
	case b.err != nil:
		return nil, b.err
	case b.embedded:
		return startEmbedded()
	}
	return StartProcess()
}

// Client returns a client of the shared Redis, closed when tb ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return Shared(tb).Client(tb)
}

// Queue returns a queue name no other test uses: the test's name and random hex.
func Queue(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", "{", "(", "}", ")", " ", "_", "#", "_").Replace(tb.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return name + "-" + hex.EncodeToString(b[:])
}

// Main runs the tests with go-redis's logger silenced, stops the shared servers, prints the
// summary of the tests that were skipped or ran smaller for want of a redis-server (see the
// package doc), and then fails the run if goroutines leaked. Call it from TestMain.
func Main(m *testing.M) {
	silenceGoRedis()
	code := m.Run()
	shared.Lock()
	if shared.s != nil {
		shared.s.Stop()
	}
	shared.Unlock()
	stopSharedCluster()
	if lines := summaryLines(packagePath()); len(lines) > 0 {
		tell(strings.Join(lines, "\n")+"\n", code == 0 && !testing.Verbose())
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
