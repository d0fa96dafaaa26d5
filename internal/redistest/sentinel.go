package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMasterName is the name the sentinel of StartSentinel monitors its master under.
const SentinelMasterName = "srqmaster"

// Sentinel is a master, one replica and one sentinel monitoring them (quorum 1, down after 1s,
// failover timeout 5s), each a local redis-server process in a temporary directory of its own.
// The sentinel's periods are shortened (SENTINEL DEBUG, Redis 7) so it notices role changes within
// a fraction of a second. It is safe for concurrent use; Failover changes what every user sees.
type Sentinel struct {
	data     []*Server // the master and the replica, in start order
	sentinel *Server

	adminMu sync.Mutex
	admin   map[string]*redis.Client

	failMu sync.Mutex // serialises Failover

	mu      sync.Mutex
	clients map[*redis.Client]struct{}
}

// StartSentinel gives tb a Sentinel setup of its own, stopped when tb ends. It skips tb when
// SRQ_TEST_BACKEND=embedded, or when redis-server is missing and CI is unset; otherwise a failure to start fails tb.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	skipForcedEmbedded(tb, "a Sentinel setup of redis-server processes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := NewSentinel(ctx)
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// NewSentinel starts a master, then its replica, and once the replica is in sync the sentinel
// (redis-server --sentinel), and waits until the sentinel knows the replica as a good failover
// target. The caller must call Stop. It fails with an error wrapping exec.ErrNotFound when
// redis-server is not on PATH, and with ctx's error when the setup is not ready in time.
func NewSentinel(ctx context.Context) (*Sentinel, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server on PATH: %w", err)
	}
	s := &Sentinel{admin: map[string]*redis.Client{}, clients: map[*redis.Client]struct{}{}}
	ports, err := reservePorts(3)
	if err != nil {
		return nil, err
	}
	data := func(extra ...string) func(int, int) []string {
		return func(int, int) []string { return append([]string{"--repl-diskless-sync-delay", "0"}, extra...) }
	}
	master, err := startNode(bin, ports[0], 0, data())
	if err != nil {
		return nil, err
	}
	s.data = append(s.data, master)
	host, port, _ := net.SplitHostPort(master.Addr)
	replica, err := startNode(bin, ports[1], 0, data("--replicaof", host, port))
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.data = append(s.data, replica)
	if err := poll(ctx, func() error { return replicaInSync(ctx, s.Admin(replica.Addr), master.Addr) }); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redistest: replica not in sync: %w", err)
	}
	if s.sentinel, err = startSentinelProcess(bin, ports[2], master.Addr); err != nil {
		s.Stop()
		return nil, err
	}
	// Redis 7 lets the sentinel's periods be shortened, so it notices roles and reconfigures the
	// old master within about a second instead of ten. Older versions refuse; they are only slower.
	_ = s.Admin(s.sentinel.Addr).Do(ctx, "sentinel", "debug", "info-period", 200, "ping-period", 200,
		"publish-period", 250, "min-link-reconnect-period", 200, "tilt-period", 5000).Err()
	if err := poll(ctx, func() error { return s.goodReplica(ctx, replica.Addr, master.Addr) }); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redistest: sentinel not ready: %w", err)
	}
	return s, nil
}

// startSentinelProcess writes a sentinel configuration monitoring master and starts the sentinel
// on port, or on a fresh port when that one is taken (up to 5 tries).
func startSentinelProcess(bin string, port int, master string) (*Server, error) {
	host, mport, _ := net.SplitHostPort(master)
	var err error
	for try := 0; try < 5; try++ {
		if try > 0 {
			ps, perr := reservePorts(1)
			if perr != nil {
				return nil, perr
			}
			port = ps[0]
		}
		var dir string
		if dir, err = os.MkdirTemp("", "srq-sentinel-*"); err != nil {
			return nil, err
		}
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %[4]s 1000\n"+
			"sentinel failover-timeout %[4]s 5000\n"+
			"sentinel parallel-syncs %[4]s 1\n",
			port, dir, filepath.Join(dir, "redis.log"), SentinelMasterName, host, mport)
		path := filepath.Join(dir, "sentinel.conf")
		if err = os.WriteFile(path, []byte(conf), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		var s *Server
		if s, err = launch(bin, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), []string{path, "--sentinel"}); err == nil {
			return s, nil
		}
		_ = os.RemoveAll(dir)
	}
	return nil, err
}

// Stop ends every process, closes the clients handed out and removes the directories. Safe to
// call twice.
func (s *Sentinel) Stop() {
	s.mu.Lock()
	clients := s.clients
	s.clients = map[*redis.Client]struct{}{}
	s.mu.Unlock()
	for cl := range clients {
		_ = cl.Close()
	}
	s.adminMu.Lock()
	for _, a := range s.admin {
		_ = a.Close()
	}
	s.admin = map[string]*redis.Client{}
	s.adminMu.Unlock()
	stopAll(append([]*Server{s.sentinel}, s.data...))
}

// SentinelAddr returns the sentinel's address.
func (s *Sentinel) SentinelAddr() string { return s.sentinel.Addr }

// Addrs returns the addresses of the two data nodes, the one started as master first.
func (s *Sentinel) Addrs() []string { return []string{s.data[0].Addr, s.data[1].Addr} }

// Node returns the server at addr (a data node or the sentinel), for Signal, or nil. Data nodes
// can also be Killed and Restarted; the sentinel cannot be restarted.
func (s *Sentinel) Node(addr string) *Server {
	for _, n := range append([]*Server{s.sentinel}, s.data...) {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Master returns the address the sentinel names as master now. It fails with the sentinel's error.
func (s *Sentinel) Master(ctx context.Context) (string, error) {
	hp, err := s.Admin(s.sentinel.Addr).Do(ctx, "sentinel", "get-master-addr-by-name", SentinelMasterName).StringSlice()
	if err != nil {
		return "", fmt.Errorf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME: %w", err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME returned %v", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// Replica returns the data node that is not Master. It fails like Master.
func (s *Sentinel) Replica(ctx context.Context) (string, error) {
	m, err := s.Master(ctx)
	if err != nil {
		return "", err
	}
	if m == s.data[0].Addr {
		return s.data[1].Addr, nil
	}
	return s.data[0].Addr, nil
}

// FailoverOptions returns go-redis options for a client that finds the master through the sentinel.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: SentinelMasterName, SentinelAddrs: []string{s.sentinel.Addr}}
}

// Client returns a new failover client (redis.NewFailoverClient), closed when tb ends. Failover
// waits until every client handed out and not yet closed talks to the new master.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return s.track(tb, redis.NewFailoverClient(s.FailoverOptions()))
}

// UniversalClient returns a new client made by redis.NewUniversalClient from the master name and
// the sentinel's address (which gives a failover client), closed when tb ends, and tracked like
// Client's.
func (s *Sentinel) UniversalClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	u := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: SentinelMasterName,
		Addrs: []string{s.sentinel.Addr}})
	c, ok := u.(*redis.Client)
	if !ok {
		_ = u.Close()
		tb.Fatalf("redistest: NewUniversalClient with a master name gave a %T, not a failover *redis.Client", u)
	}
	return s.track(tb, c)
}

func (s *Sentinel) track(tb testing.TB, c *redis.Client) *redis.Client {
	s.mu.Lock()
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	tb.Cleanup(func() {
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
		_ = c.Close()
	})
	return c
}

// Admin returns a plain client of the node at addr (a data node or the sentinel), owned by the
// setup (do not close it).
func (s *Sentinel) Admin(addr string) *redis.Client {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	a, ok := s.admin[addr]
	if !ok {
		a = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4})
		s.admin[addr] = a
	}
	return a
}

// Failover waits until the replica holds every write the master acknowledged so far, asks the
// sentinel to promote it (SENTINEL FAILOVER, retried while the sentinel answers that it has no
// good replica yet or a failover is in progress) and returns once the
// sentinel names the new master, the new master accepts writes, the sentinel has made the old
// master an in-sync replica it would fail over to again, and every client from Client or
// UniversalClient talks to the new master. It fails when ctx ends (at the latest after a minute)
// before all that holds. On Redis 7 it takes 2-3s; older sentinels, whose periods cannot be
// shortened, take ~10s more to reconfigure the old master.
func (s *Sentinel) Failover(ctx context.Context) error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	old, err := s.Master(ctx)
	if err != nil {
		return err
	}
	wrap := func(err error) error { return fmt.Errorf("redistest: sentinel failover from %s: %w", old, err) }
	// SENTINEL FAILOVER does not wait for the replica to catch up, so a write that finished just
	// before could be lost. A probe written and acknowledged by the replica (WAIT) first makes
	// every earlier write safe: replication keeps order.
	// One pipeline, so SET and WAIT share a connection (WAIT counts that connection's writes).
	err = poll(ctx, func() error {
		pipe := s.Admin(old).Pipeline()
		pipe.Set(ctx, "redistest:failover-sync", old, time.Minute)
		wait := pipe.Do(ctx, "wait", 1, 1000)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if n, _ := wait.Int(); n < 1 {
			return errors.New("the replica has not acknowledged the master's writes")
		}
		return nil
	})
	if err != nil {
		return wrap(err)
	}
	sen := s.Admin(s.sentinel.Addr)
	err = poll(ctx, func() error {
		err := sen.Do(ctx, "sentinel", "failover", SentinelMasterName).Err()
		if err != nil && !redis.HasErrorPrefix(err, "NOGOODSLAVE") && !redis.HasErrorPrefix(err, "INPROG") {
			return stopPolling{err}
		}
		return err
	})
	if err != nil {
		return wrap(err)
	}
	var repl string
	err = poll(ctx, func() error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		if m == old {
			return errors.New("the sentinel still names the old master")
		}
		mi, err := sen.Do(ctx, "sentinel", "master", SentinelMasterName).Result()
		if err != nil {
			return err
		}
		if f := replyMap(mi)["flags"]; f != "master" {
			return fmt.Errorf("the sentinel flags the master %q", f)
		}
		a := s.Admin(m)
		if role, err := a.Do(ctx, "role").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s: ROLE %v, %v", m, role, err)
		}
		if err := a.Set(ctx, "redistest:failover-probe", m, time.Minute).Err(); err != nil {
			return fmt.Errorf("%s does not accept writes: %w", m, err)
		}
		repl = m
		return nil
	})
	if err != nil {
		return wrap(err)
	}
	// The sentinel turns the old master into a replica of the new one by itself.
	err = poll(ctx, func() error {
		if err := replicaInSync(ctx, s.Admin(old), repl); err != nil {
			return err
		}
		return s.goodReplica(ctx, old, repl)
	})
	if err != nil {
		return wrap(err)
	}
	s.mu.Lock()
	clients := make([]*redis.Client, 0, len(s.clients))
	for c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	for _, c := range clients {
		err := poll(ctx, func() error {
			role, err := c.Do(ctx, "role").Slice()
			if err != nil || len(role) == 0 || role[0] != "master" {
				return fmt.Errorf("a client still sees ROLE %v, %v", role, err)
			}
			return nil
		})
		if err != nil {
			return wrap(err)
		}
	}
	return nil
}

// goodReplica checks that the sentinel knows replica as a replica of master in good health, so
// SENTINEL FAILOVER can pick it.
func (s *Sentinel) goodReplica(ctx context.Context, replica, master string) error {
	rs, err := s.Admin(s.sentinel.Addr).Do(ctx, "sentinel", "replicas", SentinelMasterName).Slice()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	mhost, mport, _ := net.SplitHostPort(master)
	for _, r := range rs {
		f := replyMap(r)
		if net.JoinHostPort(f["ip"], f["port"]) != replica {
			continue
		}
		switch {
		case f["flags"] != "slave":
			return fmt.Errorf("the sentinel flags replica %s %q", replica, f["flags"])
		case f["master-link-status"] != "ok":
			return fmt.Errorf("the sentinel sees the link of replica %s %q", replica, f["master-link-status"])
		case f["master-host"] != mhost || f["master-port"] != mport:
			return fmt.Errorf("the sentinel sees replica %s following %s:%s", replica, f["master-host"], f["master-port"])
		}
		return nil
	}
	return fmt.Errorf("the sentinel does not know replica %s yet", replica)
}

// replyMap reads a sentinel reply that is a flat list of field, value or a RESP3 map.
func replyMap(v any) map[string]string {
	m := map[string]string{}
	switch v := v.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			m[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	case map[any]any:
		for k, val := range v {
			m[fmt.Sprint(k)] = fmt.Sprint(val)
		}
	}
	return m
}
