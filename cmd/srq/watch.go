package main

import (
	"fmt"
	"time"

	"github.com/srqueue/srq/inspect"
)

// watch prints the stats every --interval, with rates from the counters' change since the
// previous reading, until interrupted or --count readings were printed.
func (c *cli) watch(args []string) error {
	fs := c.flags("watch")
	interval := fs.Duration("interval", 2*time.Second, "time between refreshes")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("watch takes no arguments"))
	}
	if *count < 0 {
		return usagef("--count %d is negative; give 0 to watch until interrupted", *count)
	}
	if *interval < 10*time.Millisecond {
		return usagef("--interval %v is too short; use at least 10ms", *interval)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	var prev *inspect.Stats
	for i := 0; *count == 0 || i < *count; i++ {
		if i > 0 {
			select {
			case <-c.ctx.Done():
				return nil // interrupted: a normal end of watch
			case <-tick.C:
			}
		}
		s, err := c.in.Stats(c.ctx, c.opts.queue)
		if err != nil {
			if c.ctx.Err() != nil {
				return nil
			}
			return c.explain(err)
		}
		var r *Rates
		if prev != nil {
			r = rates(*prev, s)
		}
		prev = &s
		if c.opts.json {
			if err := c.emitJSONLine(WatchJSON{Stats: s, Rates: r}); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		fmt.Fprintf(c.stdout, "--- %s (every %v; rates per second since the previous refresh)\n", ts(s.ServerTime), *interval)
		if err := printStats(c.stdout, s, r); err != nil {
			return err
		}
	}
	return nil
}
