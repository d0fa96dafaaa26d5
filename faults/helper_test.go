package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest/history"
)

// helperEnv carries a helperConfig as JSON to a worker process: this test binary re-executed.
const helperEnv = "SRQ_FAULTS_HELPER"

// helperConfig tells a worker process what to run.
type helperConfig struct {
	// Mode "work": run tasks with work(Work) until SIGTERM. Mode "stall": hold the first task
	// until its context ends (the test stops and resumes the process meanwhile), print "holding
	// <id> <token>" when it starts, return nil late, then shut down. Mode "hold": as "work", but
	// hold every first delivery of a task whose id starts with Hold as "stall" holds the first task,
	// and go on working. Mode "schedule": fire the queue's schedules with a Scheduler until
	// SIGTERM, running no worker (scheduleMain). Mode "workflow": run the parents of Queue and
	// their children until SIGTERM, holding them at the points the test kills at (workflowMain).
	// Mode "batch": as "work", with a batch worker (NewBatchWorker) of Batch tasks a batch, each
	// batch taking up to Work.
	Mode        string
	Batch       int    // mode "batch": BatchConfig.MaxSize
	Hold        string // the prefix of the ids of the tasks mode "hold" holds
	CheckLeases bool   // record with LeaseMiddleware: check each lease in Redis as its handler starts
	Addr        string
	Queue       string
	Shards      int    // the queue's shard count; 0: 1
	Process     string // the history's process name and the worker's consumer id
	History     string // the history file to append to
	Lease       time.Duration
	Concurrency int
	Prefetch    int
	Work        time.Duration
}

// helperMain is the worker process's main; it returns the exit code.
func helperMain() int {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper: config:", err)
		return 2
	}
	f, err := os.OpenFile(cfg.History, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	defer f.Close()
	rec := history.NewRecorder(cfg.Process, f)
	c := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer c.Close()
	q, err := srq.NewQueue[task](c, srq.QueueConfig{Name: cfg.Queue, Shards: cfg.Shards})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println(helperReady) // SIGTERM now shuts down gracefully (proc.stop waits for this)
	switch cfg.Mode {
	case "schedule":
		return scheduleMain(ctx, c, cfg)
	case "workflow":
		return workflowMain(ctx, c, cfg, rec)
	}
	h := work(cfg.Work)
	switch cfg.Mode {
	case "hold":
		worked := h
		h = srq.HandlerFunc[task](func(hctx context.Context, t *srq.Task[task]) error {
			if !strings.HasPrefix(t.ID, cfg.Hold) || t.Attempt > 1 {
				return worked.Handle(hctx, t)
			}
			fmt.Printf("holding %s %d\n", t.ID, t.Token)
			<-hctx.Done() // ends when the lease is lost: only after the test resumed this process
			return nil    // late, as "stall"; the worker goes on with the tasks it fetched meanwhile
		})
	case "stall":
		var once sync.Once
		h = srq.HandlerFunc[task](func(hctx context.Context, t *srq.Task[task]) error {
			first := false
			once.Do(func() { first = true })
			if !first {
				return nil
			}
			fmt.Printf("holding %s %d\n", t.ID, t.Token)
			<-hctx.Done() // ends when the lease is lost: only after the test resumed this process
			stop()        // then shut down, which flushes the late ack
			return nil    // a handler that finishes late and does not look at its context
		})
	}
	record := rec.Middleware(cfg.Process)
	if cfg.CheckLeases {
		record = rec.LeaseMiddleware(cfg.Process, history.RedisLease(q.ShardOf))
	}
	wcfg := srq.WorkerConfig{Concurrency: cfg.Concurrency, Prefetch: cfg.Prefetch,
		Lease: cfg.Lease, ConsumerID: cfg.Process, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		Retry:      func(int, error) time.Duration { return 10 * time.Millisecond },
		Middleware: []srq.Middleware{record}}
	var w *srq.Worker
	if cfg.Mode == "batch" {
		// One pause of up to Work for the whole batch; then each task's execution is recorded,
		// one after another in the batch's order, with the batch's outcome: the history checks
		// the order in which a batch takes an ordered partition's tasks. (The worker's middleware
		// would record every task of a batch as started at once, before the earlier ones ended.)
		wcfg.Middleware = nil
		w, err = srq.NewBatchWorker(q, srq.BatchHandlerFunc[task](func(ctx context.Context, tasks []*srq.Task[task]) error {
			err := h.Handle(ctx, tasks[0])
			for _, t := range tasks {
				_ = record(func(context.Context, *srq.Delivery) error { return err })(ctx, t.Delivery)
			}
			return err
		}), srq.BatchConfig{MaxSize: cfg.Batch, MaxWait: 5 * time.Millisecond}, wcfg)
	} else {
		w, err = srq.NewWorker(q, h, wcfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
	}
	if err := rec.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// proc is a worker process started by a test.
type proc struct {
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser // its stdin, which only mode "workflow" reads
	log    string         // the file its stderr (the worker's JSON logs) goes to
	lines  chan string    // its stdout, line by line (but helperReady); closed at EOF
	ready  chan struct{}  // closed when it printed helperReady: it handles SIGTERM from then on
	exited chan struct{}
	err    error // how it exited, once exited is closed
}

// startHelper starts a worker process running cfg; the test kills it at its end if it still runs.
func startHelper(t *testing.T, dir string, cfg helperConfig) *proc {
	t.Helper()
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(b))
	setDeathSignal(cmd)
	p := &proc{name: cfg.Process, cmd: cmd, log: filepath.Join(dir, cfg.Process+".log"),
		lines: make(chan string, 64), ready: make(chan struct{}), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == helperReady {
				close(p.ready)
				continue
			}
			select {
			case p.lines <- sc.Text():
			default: // nobody listens: drop
			}
		}
		close(p.lines)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		p.kill()
	})
	return p
}

// kill kills p with SIGKILL and waits until it is gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// wait waits up to timeout for p to exit and returns how it exited.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("process %s did not exit within %v", p.name, timeout)
	}
}

// helperReady is the line a helper process prints once SIGTERM shuts it down gracefully; before
// that, SIGTERM ends it at once ("signal: terminated").
const helperReady = "srq-helper-ready"

// stop asks p to shut down gracefully (SIGTERM), once it handles that signal, and waits up to
// timeout in all.
func (p *proc) stop(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	select {
	case <-p.ready:
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("process %s was not ready for SIGTERM within %v", p.name, timeout)
	}
	timeout = time.Until(deadline)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.wait(timeout)
}

// readHistory reads a worker process's history file; a process killed before it created the file
// recorded nothing.
func readHistory(t *testing.T, path string) []history.Event {
	t.Helper()
	evs, err := history.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// logs returns p's log lines whose message contains msg.
func (p *proc) logs(msg string) []string {
	b, _ := os.ReadFile(p.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(rec.Msg, msg) {
			out = append(out, l)
		}
	}
	return out
}
