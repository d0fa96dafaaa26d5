// Package redistest gives tests a Redis: their own redis-server on a free loopback port, the one
// named by REDIS_URL, or, when no redis-server binary exists and CI is unset, an embedded
// miniredis. It never flushes a server it did not start: tests isolate themselves with a unique
// queue name each (Queue).
package redistest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
		opt, err := redis.ParseURL(s.URL)
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

// Real reports whether s is a real Redis (not the embedded one).
func (s *Server) Real() bool { return s.Kind != KindMiniredis }

// StartProcess starts a redis-server on a free loopback port in a new temporary directory, with no
// persistence unless args ask for it; args are appended to the command line. It fails when no
// redis-server binary is on PATH.
func StartProcess(args ...string) (*Server, error) {
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
// when no binary exists and CI is unset. Under CI a missing redis-server fails tb.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := StartProcess(args...)
	if err != nil {
		if os.Getenv("CI") != "" || !errors.Is(err, exec.ErrNotFound) {
			tb.Fatalf("redistest: %v", err)
		}
		s = &Server{Kind: KindMiniredis, mini: miniredis.NewMiniRedis()}
		if err := s.mini.Start(); err != nil {
			tb.Fatalf("redistest: start miniredis: %v", err)
		}
		s.Addr = s.mini.Addr()
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartReal is Start for a test that needs a redis-server process (its statistics, its blocked
// clients, a process to stop): on the embedded fallback it skips tb, saying why it needs one.
func StartReal(tb testing.TB, why string, args ...string) *Server {
	tb.Helper()
	s := Start(tb, args...)
	if !s.Real() {
		tb.Skip("needs a real redis-server: " + why)
	}
	return s
}

var shared struct {
	sync.Mutex
	s   *Server
	err error
}

// Shared returns the Redis the whole test binary shares: the one REDIS_URL names, else a
// redis-server started on first use and stopped by Main, else (no binary, CI unset) the embedded
// one. SRQ_TEST_REDIS=miniredis picks the embedded one on purpose, to check it stays usable as the
// zero-setup backend. Tests on it isolate themselves with Queue; none may flush it.
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
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		return &Server{Addr: opt.Addr, Kind: KindURL, URL: url}, nil
	}
	if os.Getenv("SRQ_TEST_REDIS") != "miniredis" {
		s, err := StartProcess()
		if err == nil {
			return s, nil
		}
		if os.Getenv("CI") != "" || !errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%w (CI needs a real redis-server: install it or set REDIS_URL)", err)
		}
	}
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	return &Server{Addr: m.Addr(), Kind: KindMiniredis, mini: m}, nil
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

// Main runs the tests, stops the shared server, and then fails the run if goroutines leaked.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	shared.Lock()
	if shared.s != nil {
		shared.s.Stop()
	}
	shared.Unlock()
	stopSharedCluster()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
