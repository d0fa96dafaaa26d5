package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// jsonWorker is an element of `srq workers --json` as docs/cli.md documents it.
type jsonWorker struct {
	Consumer    string    `json:"consumer"`
	LastSeen    time.Time `json:"last_seen"`
	Live        bool      `json:"live"`
	Known       bool      `json:"known"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	Running     int       `json:"running"`
	Batches     int       `json:"batches"`
	BatchTasks  int       `json:"batch_tasks"`
	Started     time.Time `json:"started"`
	Updated     time.Time `json:"updated"`
}

// TestWorkers: srq workers lists a running batch worker with its record, the batch it runs and
// the tasks in it, as text and as JSON with exactly the documented fields; and a consumer without
// a record as such.
func TestWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if out := f.ok("", "--queue", "q", "workers"); !strings.Contains(out, "no consumer seen") {
		t.Fatalf("workers of a queue without consumers:\n%s", out)
	}
	q, err := srq.NewQueue[int](f.client, srq.QueueConfig{Name: "q", Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	w, err := srq.NewBatchWorker(q, srq.BatchHandlerFunc[int](func(ctx context.Context, _ []*srq.Task[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), srq.BatchConfig{MaxSize: 3, MaxWait: time.Hour}, srq.WorkerConfig{Concurrency: 2, Lease: 300 * time.Millisecond,
		ConsumerID: "batcher", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if _, err := f.eng.Fetch(f.ctx, "plain", 1, time.Minute); err != nil { // a consumer without a record
		t.Fatal(err)
	}
	if _, err := q.PublishBatch(f.ctx, []srq.Message[int]{{Value: 1}, {Value: 2}, {Value: 3}}); err != nil {
		t.Fatal(err)
	}
	var ws []jsonWorker
	deadline := time.Now().Add(20 * time.Second)
	for {
		ws = decodeStrict[[]jsonWorker](t, f.ok("", "--queue", "q", "--json", "workers"))
		if len(ws) == 2 && ws[0].Batches == 1 || len(ws) == 2 && ws[1].Batches == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch never showed: %+v", ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, k := range ws {
		switch k.Consumer {
		case "batcher":
			host, _ := os.Hostname()
			if !k.Known || !k.Live || k.Host != host || k.PID != os.Getpid() || k.Running != 1 || k.Concurrency != 2 ||
				k.Batches != 1 || k.BatchTasks != 3 || len(k.Queues) != 1 || k.Queues[0] != "q" {
				t.Errorf("the batch worker: %+v", k)
			}
		case "plain":
			if k.Known || k.Host != "" || k.PID != 0 || k.Queues != nil || k.Concurrency != 0 || !k.Started.IsZero() {
				t.Errorf("the consumer without a record: %+v, want known false and zero values", k)
			}
		default:
			t.Errorf("an unexpected consumer: %+v", k)
		}
	}
	out := f.ok("", "--queue", "q", "workers")
	for _, want := range []string{"batcher", "1 / 2", "1 (3 tasks)", strconv.Itoa(os.Getpid()), "plain", "(no record)"} {
		if !strings.Contains(out, want) {
			t.Errorf("workers lacks %q:\n%s", want, out)
		}
	}
}
