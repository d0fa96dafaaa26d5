package redistest

import (
	"bytes"
	"cmp"
	"context"
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

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// pollEvery is how often the harness looks again at a condition it waits for.
const pollEvery = 20 * time.Millisecond

// ClusterOptions shape a local Redis Cluster. Zero values mean the defaults.
type ClusterOptions struct {
	// Masters is the number of masters. Default 3, the least redis-cli accepts.
	Masters int
	// Replicas is the number of replicas of each master. Default 1; negative means none.
	Replicas int
	// Args are passed to every redis-server after the harness's own.
	Args []string
}

// Cluster is a Redis Cluster of local redis-server processes on loopback ports, each in a temporary
// directory of its own. Its topology (which node is master of which slots) is read from the
// servers at start and after each Failover. It is safe for concurrent use, but Failover changes
// what every user of the cluster sees, so tests that fail over start a cluster of their own.
type Cluster struct {
	opt   ClusterOptions
	nodes []*Server // every process, in start order

	adminMu sync.Mutex
	admin   map[string]*redis.Client // one plain client per node, for the harness's own commands

	failMu sync.Mutex // serialises Failover

	mu      sync.Mutex
	topo    []clusterShard // masters sorted by first slot
	clients map[*redis.ClusterClient]struct{}
	stopped bool
}

// clusterShard is one master with its slots and replicas, as the servers report it.
type clusterShard struct {
	id       string
	addr     string
	slots    [][2]int // inclusive ranges, ascending
	replicas []string
}

func (s clusterShard) firstSlot() int { return s.slots[0][0] }

// StartCluster gives tb a Redis Cluster of its own with 3 masters and 1 replica each, stopped when
// tb ends. It skips tb when SRQ_TEST_BACKEND=embedded, or when redis-server or redis-cli is
// missing and CI is unset; otherwise a failure to start fails tb.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, ClusterOptions{})
}

// StartClusterWith is StartCluster with options.
func StartClusterWith(tb testing.TB, opt ClusterOptions) *Cluster {
	tb.Helper()
	skipForcedEmbedded(tb, "a Redis Cluster of redis-server processes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewCluster(ctx, opt)
	if err != nil {
		skipOrFail(tb, err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// skipOrFail skips tb when err says a binary is missing and CI is unset, and fails it otherwise.
// Skips are counted in Main's summary.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, exec.ErrNotFound) && os.Getenv("CI") == "" {
		Skip(tb, err.Error(), "redis-server processes (install the redis-server package to run it)")
	}
	tb.Fatal(err)
}

// skipForcedEmbedded skips tb, which needs redis-server processes, when BackendEnv asks for the
// embedded Redis.
func skipForcedEmbedded(tb testing.TB, what string) {
	tb.Helper()
	if chosen().forced {
		Skip(tb, embeddedReason(), what)
	}
}

// NewCluster starts a Redis Cluster: it starts the processes in parallel, joins them with
// redis-cli --cluster create and waits until every node reports cluster_state:ok, agrees on the
// slots, every replica is in sync and CLUSTER SLOTS lists it (for which it writes one key,
// "redistest:<n>" with a minute's TTL, to each master). The caller must call Stop. It fails with an error wrapping
// exec.ErrNotFound when redis-server or redis-cli is not on PATH, and with ctx's error when the
// cluster is not healthy in time.
func NewCluster(ctx context.Context, opt ClusterOptions) (*Cluster, error) {
	opt.Masters = cmp.Or(opt.Masters, 3)
	opt.Replicas = cmp.Or(opt.Replicas, 1)
	opt.Replicas = max(opt.Replicas, 0)
	if opt.Masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", opt.Masters)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-server on PATH: %w", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: no redis-cli on PATH: %w", err)
	}
	n := opt.Masters * (1 + opt.Replicas)
	c := &Cluster{opt: opt, nodes: make([]*Server, n), admin: map[string]*redis.Client{},
		clients: map[*redis.ClusterClient]struct{}{}}
	ports, err := reservePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			s, err := startNode(bin, ports[2*i], ports[2*i+1], func(port, bus int) []string {
				return append([]string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
					"--cluster-node-timeout", "2000", "--cluster-allow-replica-migration", "no",
					"--repl-diskless-sync-delay", "0"}, opt.Args...)
			})
			c.nodes[i] = s
			return err
		})
	}
	if err := g.Wait(); err != nil {
		c.Stop()
		return nil, err
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(opt.Replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	setDeathSignal(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, tail(out))
	}
	// A replica whose replication offset is 0 is left out of CLUSTER SLOTS, so clients would not
	// know it: one write to each master moves the offsets.
	err = c.waitHealthy(ctx, func(topo []clusterShard) error {
		for _, m := range topo {
			if err := c.Admin(m.addr).Set(ctx, keyInSlot(m.firstSlot()), "1", time.Minute).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = c.waitHealthy(ctx, c.slotsListReplicas)
	}
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: cluster not ready: %w", err)
	}
	return c, nil
}

// reservePorts returns n distinct free loopback ports, found by holding n listeners at once.
func reservePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// errPortTaken means another process answered on the port a new server was given.
var errPortTaken = errors.New("redistest: port taken by another server")

// startNode starts a redis-server with the defaults of StartProcess plus extra(port, bus) on the
// given ports, and on fresh ones when they turn out to be taken (up to 5 tries).
func startNode(bin string, port, bus int, extra func(port, bus int) []string) (*Server, error) {
	var err error
	for try := 0; try < 5; try++ {
		if try > 0 {
			ps, perr := reservePorts(2)
			if perr != nil {
				return nil, perr
			}
			port, bus = ps[0], ps[1]
		}
		var dir string
		if dir, err = os.MkdirTemp("", "srq-redis-*"); err != nil {
			return nil, err
		}
		// The defaults of Server.start, so that Restart (restart.go) runs the same command line.
		more := extra(port, bus)
		argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, more...)
		var s *Server
		if s, err = launch(bin, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), argv); err == nil {
			s.ExtraArgs = more
			return s, nil
		}
		_ = os.RemoveAll(dir)
	}
	return nil, err
}

// launch starts bin with argv and waits until addr answers as that very process (so a server that
// lost the race for its port to another one is noticed). The Server owns dir.
func launch(bin, dir, addr string, argv []string) (*Server, error) {
	cmd := exec.Command(bin, argv...)
	cmd.Dir = dir
	setDeathSignal(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s := &Server{Addr: addr, Kind: KindProcess, ExtraArgs: argv, Dir: dir, cmd: cmd, exited: exited}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			logTail, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redistest: %s exited at start: %s %s", filepath.Base(bin), stderr.String(), tail(logTail))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if strings.Contains(info, want+"\r\n") {
				return s, nil
			}
			_ = cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("%w: %s", errPortTaken, addr)
		}
		time.Sleep(pollEvery)
	}
	_ = cmd.Process.Kill()
	<-exited
	return nil, fmt.Errorf("redistest: %s on %s did not answer within 10s", filepath.Base(bin), addr)
}

// Stop ends every process of the cluster, closes the clients it handed out and removes the
// directories. Safe to call twice.
func (c *Cluster) Stop() {
	c.mu.Lock()
	c.stopped = true
	clients := c.clients
	c.clients = map[*redis.ClusterClient]struct{}{}
	c.mu.Unlock()
	for cl := range clients {
		_ = cl.Close()
	}
	c.adminMu.Lock()
	for _, a := range c.admin {
		_ = a.Close()
	}
	c.admin = map[string]*redis.Client{}
	c.adminMu.Unlock()
	stopAll(c.nodes)
}

// stopAll stops the servers in parallel; nil entries are skipped.
func stopAll(servers []*Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		if s != nil {
			wg.Go(s.Stop)
		}
	}
	wg.Wait()
}

// Addrs returns the address of every node, masters and replicas, in start order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.Addr
	}
	return out
}

// Node returns the server at addr, for Signal, Kill and Restart, or nil when no node has that
// address. A restarted node rejoins the cluster from its nodes.conf.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// Masters returns the masters' addresses, ordered by the first slot each owns, as of the start or
// the last Failover.
func (c *Cluster) Masters() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.topo))
	for i, m := range c.topo {
		out[i] = m.addr
	}
	return out
}

// Replicas returns the addresses of the replicas of Masters()[i]. It panics when i is out of range.
func (c *Cluster) Replicas(i int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.topo[i].replicas)
}

// Slots returns the inclusive slot ranges Masters()[i] owns. It panics when i is out of range.
func (c *Cluster) Slots(i int) [][2]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.topo[i].slots)
}

// MasterOfSlot returns the index in Masters() of the master that owns slot, or -1 for a slot
// outside [0, ClusterSlots).
func (c *Cluster) MasterOfSlot(slot int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.topo {
		for _, r := range m.slots {
			if slot >= r[0] && slot <= r[1] {
				return i
			}
		}
	}
	return -1
}

// MasterOfKey returns the index in Masters() of the master that owns key's slot.
func (c *Cluster) MasterOfKey(key string) int { return c.MasterOfSlot(KeySlot(key)) }

// Options returns go-redis options for a client of the cluster.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
}

// Client returns a new cluster client, closed when tb ends. Failover waits until every client
// handed out and not yet closed routes the failed-over slots to the new master.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cl := redis.NewClusterClient(c.Options())
	c.mu.Lock()
	c.clients[cl] = struct{}{}
	c.mu.Unlock()
	tb.Cleanup(func() {
		c.mu.Lock()
		delete(c.clients, cl)
		c.mu.Unlock()
		_ = cl.Close()
	})
	return cl
}

// Admin returns a plain client of the node at addr, owned by the cluster (do not close it): for
// commands to one node, such as SCRIPT FLUSH on a replica.
func (c *Cluster) Admin(addr string) *redis.Client {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	a, ok := c.admin[addr]
	if !ok {
		a = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4})
		c.admin[addr] = a
	}
	return a
}

// Failover makes the first replica of Masters()[i] the master of its slots with CLUSTER FAILOVER
// (the graceful, manual kind: the master stops taking writes until the replica has caught up, so
// nothing acknowledged is lost). It returns once every node reports cluster_state:ok and agrees on
// the new roles, the old master is an in-sync replica of the new one, and every client from Client
// routes the slots to the new master. Masters() then lists the new master at index i. It fails
// for an index out of range or a master without replicas, and when ctx ends (at the latest after
// a minute) before all that holds.
func (c *Cluster) Failover(ctx context.Context, i int) error {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c.mu.Lock()
	if i < 0 || i >= len(c.topo) {
		c.mu.Unlock()
		return fmt.Errorf("redistest: no master %d of %d", i, len(c.topo))
	}
	old := c.topo[i]
	c.mu.Unlock()
	if len(old.replicas) == 0 {
		return fmt.Errorf("redistest: master %s has no replica to fail over to", old.addr)
	}
	repl := old.replicas[0]
	issue := func() error {
		return c.Admin(repl).Do(ctx, "cluster", "failover").Err()
	}
	if err := issue(); err != nil {
		return fmt.Errorf("redistest: CLUSTER FAILOVER on %s: %w", repl, err)
	}
	issued := time.Now()
	err := c.waitHealthy(ctx, func(topo []clusterShard) error {
		for _, m := range topo {
			if m.firstSlot() == old.firstSlot() && m.addr == repl && slices.Contains(m.replicas, old.addr) {
				return c.slotsListReplicas(topo)
			}
		}
		if time.Since(issued) > 6*time.Second {
			// A manual failover times out after 5s and is not retried by Redis; ask again.
			if err := issue(); err == nil {
				issued = time.Now()
			}
		}
		return fmt.Errorf("%s is not yet the master of slot %d with %s as its replica", repl, old.firstSlot(), old.addr)
	})
	if err != nil {
		return fmt.Errorf("redistest: failover of master %d (%s to %s): %w", i, old.addr, repl, err)
	}
	key := keyInSlot(old.firstSlot())
	c.mu.Lock()
	clients := make([]*redis.ClusterClient, 0, len(c.clients))
	for cl := range c.clients {
		clients = append(clients, cl)
	}
	c.mu.Unlock()
	for _, cl := range clients {
		err := poll(ctx, func() error {
			cl.ReloadState(ctx)
			m, err := cl.MasterForKey(ctx, key)
			if err != nil {
				return err
			}
			if got := m.Options().Addr; got != repl {
				return fmt.Errorf("a client still routes slot %d to %s", old.firstSlot(), got)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("redistest: failover of master %d (%s to %s): %w", i, old.addr, repl, err)
		}
	}
	return nil
}

// stopPolling wraps an error that poll returns at once instead of trying again.
type stopPolling struct{ error }

// slotsListReplicas checks that every node's CLUSTER SLOTS, which clients read, names every
// replica of topo.
func (c *Cluster) slotsListReplicas(topo []clusterShard) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range c.nodes {
		slots, err := c.Admin(s.Addr).ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", s.Addr, err)
		}
		for _, sl := range slots {
			if len(sl.Nodes) != 1+c.opt.Replicas {
				return fmt.Errorf("%s: CLUSTER SLOTS lists %d nodes for slot %d, want %d", s.Addr, len(sl.Nodes), sl.Start, 1+c.opt.Replicas)
			}
		}
	}
	return nil
}

// poll calls cond until it returns nil, every pollEvery, and fails with ctx's error joined to
// cond's last error when ctx ends first, or with the error a stopPolling wraps.
func poll(ctx context.Context, cond func() error) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// waitHealthy waits until every node reports cluster_state:ok, all nodes report the same
// topology, no node is flagged failing, every replica is in sync, and want accepts the topology,
// which it then stores.
func (c *Cluster) waitHealthy(ctx context.Context, want func([]clusterShard) error) error {
	return poll(ctx, func() error {
		topo, err := c.healthyTopology(ctx)
		if err != nil {
			return err
		}
		if err := want(topo); err != nil {
			return err
		}
		c.mu.Lock()
		c.topo = topo
		c.mu.Unlock()
		return nil
	})
}

func (c *Cluster) healthyTopology(ctx context.Context) ([]clusterShard, error) {
	var first []clusterShard
	var firstAddr string
	for _, s := range c.nodes {
		a := c.Admin(s.Addr)
		info, err := a.ClusterInfo(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER INFO: %w", s.Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return nil, fmt.Errorf("%s: cluster_state is not ok", s.Addr)
		}
		nodes, err := a.ClusterNodes(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr, err)
		}
		topo, err := parseClusterNodes(nodes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Addr, err)
		}
		if first == nil {
			first, firstAddr = topo, s.Addr
		} else if !sameTopology(first, topo) {
			return nil, fmt.Errorf("%s and %s do not agree on the topology yet", firstAddr, s.Addr)
		}
	}
	if len(first) != c.opt.Masters {
		return nil, fmt.Errorf("%d masters own slots, want %d", len(first), c.opt.Masters)
	}
	for _, m := range first {
		if len(m.replicas) != c.opt.Replicas {
			return nil, fmt.Errorf("master %s has %d replicas, want %d", m.addr, len(m.replicas), c.opt.Replicas)
		}
		for _, r := range m.replicas {
			if err := replicaInSync(ctx, c.Admin(r), m.addr); err != nil {
				return nil, err
			}
		}
	}
	return first, nil
}

// replicaInSync checks with INFO replication that the node a is a replica of master with its link
// up and no sync in progress.
func replicaInSync(ctx context.Context, a *redis.Client, master string) error {
	info, err := a.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: INFO replication: %w", a.Options().Addr, err)
	}
	f := infoFields(info)
	host, port, _ := net.SplitHostPort(master)
	switch {
	case f["role"] != "slave":
		return fmt.Errorf("%s: role %q, want slave", a.Options().Addr, f["role"])
	case f["master_host"] != host || f["master_port"] != port:
		return fmt.Errorf("%s: replicates %s:%s, want %s", a.Options().Addr, f["master_host"], f["master_port"], master)
	case f["master_link_status"] != "up" || f["master_sync_in_progress"] != "0":
		return fmt.Errorf("%s: replication link %s, sync in progress %s", a.Options().Addr,
			f["master_link_status"], f["master_sync_in_progress"])
	}
	return nil
}

// parseClusterNodes reads a CLUSTER NODES reply into the masters that own slots, sorted by first
// slot. It fails when a node is flagged failing, in handshake or without address.
func parseClusterNodes(s string) ([]clusterShard, error) {
	type node struct {
		id, addr, master string
		isMaster         bool
		slots            [][2]int
	}
	var nodes []node
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if slices.Contains(flags, bad) {
				return nil, fmt.Errorf("node %s is flagged %s", addr, bad)
			}
		}
		n := node{id: f[0], addr: addr, master: f[3], isMaster: slices.Contains(flags, "master")}
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, rng := strings.Cut(sl, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("bad slot %q in CLUSTER NODES", sl)
			}
			b := a
			if rng {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("bad slot range %q in CLUSTER NODES", sl)
				}
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	var shards []clusterShard
	for _, n := range nodes {
		if !n.isMaster || len(n.slots) == 0 {
			continue
		}
		sh := clusterShard{id: n.id, addr: n.addr, slots: n.slots}
		slices.SortFunc(sh.slots, func(a, b [2]int) int { return a[0] - b[0] })
		for _, r := range nodes {
			if !r.isMaster && r.master == n.id {
				sh.replicas = append(sh.replicas, r.addr)
			}
		}
		slices.Sort(sh.replicas)
		shards = append(shards, sh)
	}
	slices.SortFunc(shards, func(a, b clusterShard) int { return a.firstSlot() - b.firstSlot() })
	covered := 0
	for _, sh := range shards {
		for _, r := range sh.slots {
			covered += r[1] - r[0] + 1
		}
	}
	if covered != ClusterSlots {
		return nil, fmt.Errorf("%d of %d slots are assigned", covered, ClusterSlots)
	}
	return shards, nil
}

func sameTopology(a, b []clusterShard) bool {
	return slices.EqualFunc(a, b, func(x, y clusterShard) bool {
		return x.id == y.id && x.addr == y.addr && slices.Equal(x.slots, y.slots) && slices.Equal(x.replicas, y.replicas)
	})
}

// KeySlot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag, the part between
// the first '{' and the next '}' when that part is not empty, else of the whole key, modulo 16384.
func KeySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % ClusterSlots
}

// keyInSlot returns a key whose slot is slot.
func keyInSlot(slot int) string {
	for i := 0; ; i++ {
		if k := "redistest:" + strconv.Itoa(i); KeySlot(k) == slot {
			return k
		}
	}
}

// NodeCommandStats are the command statistics of one master.
type NodeCommandStats struct {
	Addr     string
	Commands map[string]CommandStat // by lower-case command name, e.g. "evalsha"
	CPUUsec  int64                  // CPU time of the node's main thread (MainThreadCPU)
}

// Total sums the calls and microseconds of the named commands (all commands when none is named).
func (n NodeCommandStats) Total(commands ...string) CommandStat {
	var t CommandStat
	for name, s := range n.Commands {
		if len(commands) == 0 || slices.Contains(commands, name) {
			t.Calls += s.Calls
			t.Usec += s.Usec
			t.FailedCalls += s.FailedCalls
		}
	}
	return t
}

// CommandStats reads INFO commandstats and the main thread's CPU time of every master, in the
// order of Masters(). It fails with the first error of a master.
func (c *Cluster) CommandStats(ctx context.Context) ([]NodeCommandStats, error) {
	masters := c.Masters()
	out := make([]NodeCommandStats, len(masters))
	for i, addr := range masters {
		info, err := c.Admin(addr).Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return nil, fmt.Errorf("redistest: INFO commandstats cpu of %s: %w", addr, err)
		}
		out[i] = NodeCommandStats{Addr: addr, Commands: ParseCommandStats(info), CPUUsec: MainThreadCPU(info)}
	}
	return out, nil
}

// ResetStats runs CONFIG RESETSTAT on every node, so CommandStats counts from now. It fails with
// the first error of a node.
func (c *Cluster) ResetStats(ctx context.Context) error {
	for _, addr := range c.Addrs() {
		if err := c.Admin(addr).ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("redistest: CONFIG RESETSTAT on %s: %w", addr, err)
		}
	}
	return nil
}

var sharedCluster struct {
	sync.Mutex
	c   *Cluster
	err error
}

// SharedCluster returns the Redis Cluster the whole test binary shares (3 masters, 1 replica
// each), started on first use and stopped by Main. Tests on it use queues of their own (Queue)
// and must not call Failover; those start their own with StartCluster. Like StartCluster it skips
// tb with SRQ_TEST_BACKEND=embedded, or without redis-server or redis-cli unless CI is set, and fails tb when the cluster does not
// start.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	skipForcedEmbedded(tb, "a Redis Cluster of redis-server processes")
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.c == nil && sharedCluster.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sharedCluster.c, sharedCluster.err = NewCluster(ctx, ClusterOptions{})
		cancel()
	}
	if sharedCluster.err != nil {
		skipOrFail(tb, sharedCluster.err)
	}
	return sharedCluster.c
}

// stopSharedCluster stops the shared cluster; Main calls it.
func stopSharedCluster() {
	sharedCluster.Lock()
	defer sharedCluster.Unlock()
	if sharedCluster.c != nil {
		sharedCluster.c.Stop()
	}
}
