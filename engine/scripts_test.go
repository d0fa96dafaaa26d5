package engine

import (
	"context"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"
)

// TestScriptsLoad loads every embedded script into a real Redis: a script that does not compile
// fails here, not in production.
func TestScriptsLoad(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if err := b.eng.LoadScripts(b.ctx); err != nil {
		t.Fatal(err)
	}
	shas := make([]string, 0, len(scripts))
	for _, s := range scripts {
		shas = append(shas, s.sha())
	}
	exists, err := b.client.ScriptExists(b.ctx, shas...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range exists {
		if !ok {
			t.Errorf("script with sha %s not loaded", shas[i])
		}
	}
}

// TestScriptsReloadAfterFlush checks that a server that forgot the scripts (restart, failover,
// SCRIPT FLUSH) gets them again, for single calls and inside pipelines. It flushes scripts, so it
// runs on a server of its own.
func TestScriptsReloadAfterFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	e, err := New(c, Config{Queue: redistest.Queue(t), Scripts: ScriptsEval}) // the EVALSHA path
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publish(ctx, []Message{{ID: "a"}}); err != nil {
		t.Fatalf("publish after SCRIPT FLUSH: %v", err)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.runPipelined(ctx, []call{
		{script: scriptStats},
		{script: scriptTask, args: []any{"a"}},
		{script: scriptStats},
	})
	if err != nil {
		t.Fatalf("pipeline after SCRIPT FLUSH: %v", err)
	}
	if len(res) != 3 {
		t.Fatalf("pipeline returned %d results, want 3", len(res))
	}
	if _, ok := res[1].([]any); !ok {
		t.Fatalf("task reply %v, want the record of a", res[1])
	}
	st, err := e.Stats(ctx)
	if err != nil || st.Pending != 1 {
		t.Fatalf("stats %+v, %v: want 1 pending", st, err)
	}
}
