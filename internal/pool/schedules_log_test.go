package pool

import (
	"log/slog"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/logtest"
)

// The logger of whatever fires schedules gets each tick published at Debug and each schedule's
// missed ticks at Warn (docs/schedules.md).
func TestReportTicksLevels(t *testing.T) {
	t.Parallel()
	logs := &logtest.Recorder{}
	tick := time.UnixMilli(1_765_000_000_000)
	reportTicks(slog.New(logs), "q", engine.FireResult{
		Fired:  []engine.FiredTick{{Schedule: "s", Tick: tick, ID: "sched/s/1765000000000"}},
		Missed: []engine.MissedTicks{{Schedule: "s", Count: 3}},
	})
	fired, missed := logs.Find("srq: schedule fired"), logs.Find("srq: schedule missed ticks")
	if len(fired) != 1 || fired[0].Level != slog.LevelDebug || logtest.Attr(fired[0], "id") != "sched/s/1765000000000" ||
		logtest.Attr(fired[0], "queue") != "q" {
		t.Errorf("fired: %v, want one Debug line with the queue and the tick's id", fired)
	}
	if len(missed) != 1 || missed[0].Level != slog.LevelWarn || logtest.Attr(missed[0], "schedule") != "s" ||
		logtest.Attr(missed[0], "missed") != int64(3) {
		t.Errorf("missed: %v, want one Warn line with the schedule and the count", missed)
	}
}
