package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestWorkloads runs every workload on the test Redis with a stand-in for callgrind_control: each
// must zero the counters once, after its warm-up, and dump them once, after its measured calls.
func TestWorkloads(t *testing.T) {
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.Client(t)
			queue := redistest.Queue(t)
			e, err := engine.New(c, engine.Config{Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := redistest.DropKeys(context.Background(), c, e.Keys().Base()); err != nil {
					t.Error(err)
				}
			})
			var ops []string
			tasks, err := w.run(context.Background(), c, queue, 3, func(op string) error {
				ops = append(ops, op)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ops, []string{"-z", "-d"}) {
				t.Fatalf("control calls %v, want -z then -d", ops)
			}
			want := 3 * fetchSize
			switch w.name {
			case "consumers8", "consumers8-alone", "parallel8":
				want = 3 * fetchSize * consumers
			case "producers8", "producers8-alone":
				want = 3 * consumers
			case "publish1", "publish1-one", "worker":
				want = 3
			case "publish100", "publish100-one":
				want = 300
			}
			if strings.HasPrefix(w.name, "defs-") {
				want = 3 // calls
			}
			if tasks != want {
				t.Fatalf("%d tasks, want %d", tasks, want)
			}
		})
	}
}

func TestReadTotal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callgrind.out.1")
	dump := "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 409454147\n\nfn=(1) main\n0 5\ntotals: 409981179\n"
	if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := readTotal(path); err != nil || n != 409454147 {
		t.Fatalf("readTotal = %d, %v; want the summary line's 409454147", n, err)
	}
	if err := os.WriteFile(path, []byte("events: Ir\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readTotal(path); err == nil {
		t.Fatal("a dump without a summary line was read")
	}
}

// TestMeasureServerFailsToStart: when redis-server under valgrind exits at once, measure returns
// the error with what the process printed, instead of waiting for a server that is gone.
func TestMeasureServerFailsToStart(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho 'valgrind: cannot start' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "valgrind"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	done := make(chan error, 1)
	go func() {
		_, _, err := measure(context.Background(), "redis-server", workloads[0], 1, "", "eval")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "valgrind: cannot start") {
			t.Fatalf("measure: %v, want the process's exit and its message", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("measure still waits for a server that exited")
	}
}
