package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/web"
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

// web serves the dashboard of package web on --addr, with /metrics, until interrupted.
func (c *cli) web(args []string) error {
	fs := c.flags("web")
	addr := fs.String("addr", ":8080", "address to listen on")
	readOnly := fs.Bool("read-only", false, "show, but allow no action")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("web takes no arguments"))
	}
	if err := c.connect(); err != nil {
		return err
	}
	h, err := web.NewHandler(c.in, web.Config{ReadOnly: *readOnly})
	if err != nil {
		return err
	}
	metrics, err := web.NewMetrics(c.in, web.MetricsConfig{})
	if err != nil {
		return err
	}
	defer func() { _ = metrics.Shutdown(context.WithoutCancel(c.ctx)) }()
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.Handle("/", h)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another --addr)", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stderr, "srq: serving the dashboard on http://%s/ and metrics on /metrics\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-c.ctx.Done():
		shut, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shut)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		return err
	}
}
