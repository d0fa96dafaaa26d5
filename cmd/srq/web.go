package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/srqueue/srq/web"
)

// defaultWebAddr is where srq web listens unless --addr says otherwise: this machine only.
const defaultWebAddr = "127.0.0.1:8080"

// webTimeouts bound how long srq web's server waits on a client: for a request's headers, for the
// whole request, for the answer to be written (from the end of the headers), and for the next
// request on a kept-alive connection.
type webTimeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultWebTimeouts are srq web's timeouts. Every answer is bounded: pages and JSON read pages
// of bounded size, a scrape gives up after web.DefaultScrapeTimeout, and the events page polls
// /api/events, which answers at once without waiting for events, so no route streams and one
// write timeout fits them all.
var defaultWebTimeouts = webTimeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: time.Minute, idle: time.Minute}

// newWebServer returns srq web's server of handler, with the timeouts t.
func newWebServer(handler http.Handler, logger *slog.Logger, t webTimeouts) *http.Server {
	return &http.Server{Handler: handler, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write,
		IdleTimeout: t.idle, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}

// hostList is a flag that collects host names: repeated, or separated by commas.
type hostList []string

func (l *hostList) String() string { return strings.Join(*l, ",") }

func (l *hostList) Set(s string) error {
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			*l = append(*l, h)
		}
	}
	return nil
}

// webHosts is the web.Config.AllowedHosts of srq web: the --allowed-host entries; without any, on a
// single address that is not loopback, that address, so that the Host check applies to every
// connection there too. On loopback, or on every interface, no entry leaves the default: the
// requests that come over loopback are checked.
func webHosts(given []string, addr net.Addr) []string {
	if len(given) > 0 {
		return given
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && !tcp.IP.IsUnspecified() {
		return []string{tcp.IP.String()}
	}
	return nil
}

// webAuth is the basic-auth account of srq web; the zero value means none.
type webAuth struct {
	user, password string
}

// webAuthFrom reads the account from --user (else $SRQ_WEB_USER) and --password-file (else
// $SRQ_WEB_PASSWORD); a password on the command line would show in the process list. It fails
// with a usage error when only one of user and password is given or the file cannot be read.
func webAuthFrom(user, passwordFile string) (webAuth, error) {
	a := webAuth{user: user, password: os.Getenv("SRQ_WEB_PASSWORD")}
	if a.user == "" {
		a.user = os.Getenv("SRQ_WEB_USER")
	}
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return webAuth{}, usagef("--password-file: %v", err)
		}
		a.password = strings.TrimRight(string(b), "\r\n")
	}
	switch {
	case a.user == "" && a.password == "":
		return webAuth{}, nil
	case a.user == "":
		return webAuth{}, usagef("a password is set but no user: give --user (or SRQ_WEB_USER) too")
	case a.password == "":
		return webAuth{}, usagef("--user %q has no password: set SRQ_WEB_PASSWORD or --password-file", a.user)
	case strings.ContainsRune(a.user, ':'):
		return webAuth{}, usagef("--user %q holds a colon, which basic auth cannot carry", a.user)
	}
	return a, nil
}

// wrap asks every request for the account's user and password (HTTP basic auth), comparing in
// constant time, and answers 401 with a challenge otherwise, logging the refusal to log at Info
// (as the dashboard logs its own refusals).
func (a webAuth) wrap(next http.Handler, log *slog.Logger) http.Handler {
	wantUser, wantPass := sha256.Sum256([]byte(a.user)), sha256.Sum256([]byte(a.password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		if subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="srq", charset="UTF-8"`)
			reason := "no credentials"
			if user != "" || pass != "" {
				reason = "wrong user or password"
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "srq web: request refused by basic auth",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr),
				slog.Int("status", http.StatusUnauthorized), slog.String("error", reason))
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// web serves the dashboard of package web on --addr, with /metrics, until interrupted. It listens
// on loopback unless told otherwise, answers only the hosts webHosts allows (421 otherwise, on
// every path), and refuses to serve the mutations (requeue, purge, pause) beyond this machine
// without basic auth unless --insecure-public takes the risk.
func (c *cli) web(args []string) error {
	fs := c.flags("web")
	addr := fs.String("addr", defaultWebAddr, "address to listen on (host:port; \":8080\" is every interface)")
	readOnly := fs.Bool("read-only", false, "show, but allow no action")
	user := fs.String("user", "", "basic-auth user name (default $SRQ_WEB_USER); the password from $SRQ_WEB_PASSWORD or --password-file")
	passwordFile := fs.String("password-file", "", "file holding the basic-auth password (default $SRQ_WEB_PASSWORD)")
	insecure := fs.Bool("insecure-public", false, "serve requeue, purge and pause beyond loopback without authentication")
	var hosts hostList
	fs.Var(&hosts, "allowed-host", "a host name (or name:port) requests may be for, beside localhost and loopback addresses; "+
		"repeat it or separate names with commas")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("web takes no arguments"))
	}
	auth, err := webAuthFrom(*user, *passwordFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pick another --addr)", *addr, err)
	}
	defer ln.Close() // the server closes it too; this one is for the returns before it serves
	logger := slog.New(slog.NewTextHandler(c.stderr, nil))
	allowed := webHosts(hosts, ln.Addr())
	mux := http.NewServeMux()
	var handler http.Handler = mux
	if auth.user != "" {
		handler = auth.wrap(mux, logger)
	}
	if handler, err = web.RestrictHosts(handler, allowed, logger); err != nil {
		return usagef("--allowed-host: %s", strings.TrimPrefix(err.Error(), "srq web: "))
	}
	public := !isLoopback(ln.Addr())
	if public && !*readOnly && auth.user == "" && !*insecure {
		return usagef("--addr %s reaches beyond this machine, and the dashboard would let anyone who reaches it "+
			"requeue, purge and pause without a password: set --user and SRQ_WEB_PASSWORD (basic auth), or pass "+
			"--read-only, or listen on 127.0.0.1; --insecure-public serves it as it is", *addr)
	}
	if err := c.connect(); err != nil {
		return err
	}
	h, err := web.NewHandler(c.in, web.Config{ReadOnly: *readOnly, Logger: logger, AllowedHosts: allowed})
	if err != nil {
		return err
	}
	metrics, err := web.NewMetrics(c.in, web.MetricsConfig{})
	if err != nil {
		return err
	}
	defer func() { _ = metrics.Shutdown(context.WithoutCancel(c.ctx)) }()
	mux.Handle("/metrics", metrics)
	mux.Handle("/", h)
	srv := newWebServer(handler, logger, c.webTimeouts)
	c.describeWeb(c.stderr, ln.Addr(), public, *readOnly, auth, allowed)
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

// describeWeb says at start what srq web serves: where, for which host names, to whom, whether it
// can change anything, and over which Redis.
func (c *cli) describeWeb(w io.Writer, addr net.Addr, public, readOnly bool, auth webAuth, allowed []string) {
	fmt.Fprintf(w, "srq: serving the dashboard on http://%s/ and metrics on /metrics\n", addr)
	reach := "this machine only (loopback)"
	if public {
		reach = "beyond this machine"
		if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
			reach = "every interface of this machine"
		}
	}
	mode := "read-write: requeue, purge and pause are enabled"
	if readOnly {
		mode = "read-only"
	}
	who := "no authentication: anyone who reaches the address may use it"
	if auth.user != "" {
		who = fmt.Sprintf("basic auth as user %q (over plain HTTP: put TLS in front of it beyond a trusted network)", auth.user)
	}
	fmt.Fprintf(w, "srq: listening on %s; %s; %s\n", reach, mode, escapeText(who))
	switch {
	case len(allowed) > 0:
		fmt.Fprintf(w, "srq: answers requests for localhost, loopback addresses, the address it listens on and %s; "+
			"other host names get 421 Misdirected Request\n", escapeText(strings.Join(allowed, ", ")))
	case public:
		fmt.Fprintf(w, "srq: answers requests for any host name beyond loopback, and for localhost and loopback addresses "+
			"over loopback (--allowed-host limits them to the names given)\n")
	default:
		fmt.Fprintf(w, "srq: answers requests for localhost and loopback addresses only; other host names get "+
			"421 Misdirected Request (--allowed-host adds one)\n")
	}
	fmt.Fprintf(w, "srq: queues under prefix %q on Redis %s\n", c.opts.prefix, escapeText(redactURL(c.opts.redisURL)))
}

// isLoopback reports whether a listener's address is reachable from this machine only.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
