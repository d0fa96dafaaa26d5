package main

import (
	"context"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// redisStats counts the scripts' time whichever way the engine runs them: as a library (FCALL) or
// by their hashes (EVALSHA). It read only EVALSHA, so the default reported 0 µs of script time.
func TestRedisStatsCountsEveryScriptPath(t *testing.T) {
	srv := redistest.SharedReal(t, "the embedded Redis keeps no commandstats")
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, mode := range []engine.ScriptMode{engine.ScriptsFunction, engine.ScriptsEval} {
		e, err := engine.New(c, engine.Config{Queue: redistest.Queue(t), Scripts: mode})
		if err != nil {
			t.Fatal(err)
		}
		before, err := redisStats(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			if _, err := e.Publish(ctx, []engine.Message{{Payload: []byte("x")}}); err != nil {
				t.Fatal(err)
			}
		}
		after, err := redisStats(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if after.scriptUsec <= before.scriptUsec {
			t.Errorf("scripts %v: script time %d µs before 200 publishes, %d after", mode, before.scriptUsec, after.scriptUsec)
		}
	}
}
