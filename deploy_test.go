package srq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

// The environment of the worker process TestDeployedWorkerSignals runs: this test binary again.
const (
	deployChildEnv = "SRQ_TEST_DEPLOY_CHILD" // "ignores" (its handler ignores its context) or "returns"
	deployAddrEnv  = "SRQ_TEST_DEPLOY_ADDR"
	deployQueueEnv = "SRQ_TEST_DEPLOY_QUEUE"
)

// deployedWorker is the main of a worker process as docs/deploying.md shows it: the first SIGTERM
// or SIGINT ends Run's context (a graceful shutdown), a second one ends the process at once.
func deployedWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first signal, the default action again: a second one ends the process

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	client := redis.NewClient(&redis.Options{Addr: os.Getenv(deployAddrEnv)})
	defer client.Close()
	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: os.Getenv(deployQueueEnv)})
	if err != nil {
		logger.Error("queue", "err", err)
		os.Exit(1)
	}
	ignores := os.Getenv(deployChildEnv) == "ignores"
	h := srq.HandlerFunc[string](func(ctx context.Context, t *srq.Task[string]) error {
		fmt.Println("handler started")
		if ignores {
			select {} // ignores its context: only the process's end stops it
		}
		<-ctx.Done() // cut off at ShutdownTimeout
		return context.Cause(ctx)
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Logger: logger, ShutdownTimeout: 300 * time.Millisecond})
	if err != nil {
		logger.Error("worker", "err", err)
		os.Exit(1)
	}
	if err := w.Run(ctx); err != nil {
		logger.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

// TestDeployedWorkerSignals runs the worker process docs/deploying.md shows, with one task
// running. One SIGTERM: it logs that it shuts down, cuts the handler off at ShutdownTimeout, hands
// the task back without using an attempt, leaves the consumers list and exits 0. A handler that
// ignores its context holds that shutdown up; a second SIGTERM then ends the process at once, and
// its task stays leased until its lease expires.
func TestDeployedWorkerSignals(t *testing.T) {
	if os.Getenv(deployChildEnv) != "" {
		deployedWorker()
		return
	}
	t.Parallel()
	for _, handler := range []string{"returns", "ignores"} {
		t.Run("handler "+handler, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			c := srv.Client(t)
			ctx := testCtx(t)
			name := redistest.Queue(t)
			q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Publish(ctx, "job", &srq.PublishOpts{ID: "job"}); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestDeployedWorkerSignals$")
			cmd.Env = append(os.Environ(), deployChildEnv+"="+handler, deployAddrEnv+"="+srv.Addr, deployQueueEnv+"="+name)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			logs := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					logs <- sc.Text()
				}
				close(logs)
			}()
			started := bufio.NewScanner(stdout)
			if !started.Scan() || started.Text() != "handler started" {
				_ = cmd.Process.Kill()
				t.Fatalf("no handler started: %q", started.Text())
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var seen []string
			waitLog := func(msg string) {
				t.Helper()
				for line := range logs {
					seen = append(seen, line)
					if strings.Contains(line, msg) {
						return
					}
				}
				t.Fatalf("no log line %q in %q", msg, seen)
			}
			waitLog(`"level":"INFO","msg":"shutting down`)
			if handler == "ignores" {
				waitLog("shutdown timeout: cancelling running handlers") // and it keeps waiting
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			for line := range logs {
				seen = append(seen, line)
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			st, serr := q.Stats(ctx)
			if serr != nil {
				t.Fatal(serr)
			}
			if handler == "returns" {
				if err != nil {
					t.Fatalf("exit: %v; want 0 after one SIGTERM (logs %q)", err, seen)
				}
				ti, err := q.Engine().Task(ctx, "job")
				if err != nil || ti.Attempts != 0 || st.Pending != 1 || st.InFlight != 0 || st.HandedBack != 1 {
					t.Fatalf("after the shutdown: %+v, %v, %+v; want the task pending again, no attempt used, handed back", ti, err, st)
				}
				if n, err := c.ZCard(ctx, q.Engine().Keys().Consumers()).Result(); err != nil || n != 0 {
					t.Fatalf("%d consumers listed after the shutdown, %v; want none", n, err)
				}
				return
			}
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
				t.Fatalf("exit: %v; want the process ended by the second SIGTERM (logs %q)", err, seen)
			}
			if st.InFlight != 1 {
				t.Fatalf("after the second SIGTERM: %+v; want the task still leased, until its lease expires", st)
			}
		})
	}
}
