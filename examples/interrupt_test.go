// Package examples_test runs the example programs as a user would, on a Redis of the test's own.
package examples_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestExamplesStopOnSIGINT builds every program under examples/, runs each against a Redis of its
// own (REDIS_URL), sends it SIGINT (the schedule example SIGTERM too, in a run of its own) once it
// has written keys, and checks that it exits 0 and leaves no key behind: it stops its workers (and
// schedulers) and deletes its queues (and schedules). The schedule example runs for seconds, so the signal always lands while it runs, and it must say it
// was interrupted; the others may have finished by then, which must leave no key either.
func TestExamplesStopOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example")
	}
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) < 6 {
		t.Fatalf("found examples %v", names)
	}
	// One go build for all, sharing its work.
	args := append([]string{"build", "-o", bin + string(filepath.Separator)}, prefixed("./", names)...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	type run struct {
		name, test string
		sig        os.Signal
	}
	var runs []run
	for _, name := range names {
		runs = append(runs, run{name, name, syscall.SIGINT})
	}
	// SIGTERM too, to the example that always runs long enough for the signal to land.
	runs = append(runs, run{"schedule", "schedule-SIGTERM", syscall.SIGTERM})
	for _, r := range runs {
		name, sig := r.name, r.sig
		t.Run(r.test, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			c := srv.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			cmd := exec.Command(filepath.Join(bin, name))
			cmd.Env = append(os.Environ(), "REDIS_URL=redis://"+srv.Addr)
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()

			// Interrupt it once it has written keys, or as soon as it has ended.
			var ended bool
			var runErr error
		wait:
			for {
				select {
				case runErr = <-exited:
					ended = true
					break wait
				case <-ctx.Done():
					_ = cmd.Process.Kill()
					t.Fatalf("no key written in 2 minutes:\n%s", out.String())
				case <-time.After(time.Millisecond):
				}
				if n, err := c.DBSize(ctx).Result(); err == nil && n > 0 {
					break
				}
			}
			if !ended {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case runErr = <-exited:
				case <-ctx.Done():
					_ = cmd.Process.Kill()
					t.Fatalf("did not exit within 2 minutes of %v:\n%s", sig, out.String())
				}
			}
			if runErr != nil {
				t.Fatalf("%v after %v:\n%s", runErr, sig, out.String())
			}
			interrupted := strings.Contains(out.String(), "interrupted: stopped and cleaned up")
			t.Logf("interrupted while it ran: %v", interrupted)
			if name == "schedule" && !interrupted {
				t.Fatalf("the schedule example did not say it was interrupted:\n%s", out.String())
			}
			keys, err := c.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) > 0 {
				t.Fatalf("keys left behind: %v\n%s", keys, out.String())
			}
		})
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the writes of a process's stdout and stderr copiers and
// the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
