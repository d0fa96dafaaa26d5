package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a stderr the command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWebServesDashboardAndMetrics: srq web serves the dashboard and /metrics on the address it
// prints, and returns 0 when its context ends.
func TestWebServesDashboardAndMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	var stderr lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--redis-url", f.url, "--prefix", f.prefix, "web", "--addr", "127.0.0.1:0"},
			strings.NewReader(""), io.Discard, &stderr)
	}()
	addrRE := regexp.MustCompile(`http://([0-9.:]+)/`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
			break
		}
		select {
		case c := <-code:
			t.Fatalf("srq web exited with %d: %s", c, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("srq web printed no address: %s", stderr.String())
		}
	}
	for path, want := range map[string]string{"/": ">q<", "/queue?q=q": "pending", "/metrics": "srq_queue_"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, body without %q:\n%.600s", path, res.StatusCode, want, body)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("srq web exited with %d after its context ended: %s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("srq web did not return after its context ended")
	}
}
