// Package devredis gives programs that try srq a Redis: the server REDIS_URL names, or an embedded,
// in-process one (github.com/alicebob/miniredis/v2) when it is unset. For examples, demos and local
// experiments: the embedded Redis keeps everything in memory, in the process that started it. Tests
// want package srqtest instead, whose NewRedis gives each test an embedded Redis of its own (or
// REDIS_URL's server).
package devredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Connect returns a client of REDIS_URL's server, or of an embedded Redis started here; where
// says which, with the URL's credentials shown as xxxxx, and stop closes the client (and the
// embedded server). REDIS_URL is a URL go-redis's ParseURL reads (redis://[user:password@]host:port/db,
// rediss:// for TLS, unix://), or a bare host:port, taken as redis://host:port. Connect does not
// talk to the server: an unreachable one fails the first command. It silences go-redis's own
// logger for the whole process (redis.SetLogger), as the srq command does, so a server that
// cannot be reached gives the caller's error alone, not a log line per failed dial. It fails with
// an error naming REDIS_URL (credentials hidden) when the URL does not parse, or with the embedded
// server's error; stop is never nil, so `defer stop()` is safe whatever Connect returned.
func Connect() (c redis.UniversalClient, where string, stop func(), err error) {
	silenceGoRedis()
	if raw := os.Getenv("REDIS_URL"); raw != "" {
		opt, err := ParseURL(raw)
		if err != nil {
			return nil, "", func() {}, err
		}
		rc := redis.NewClient(opt)
		return rc, Redact(raw), func() { _ = rc.Close() }, nil
	}
	rc, stop, err := Embedded()
	if err != nil {
		return nil, "", func() {}, err
	}
	return rc, "embedded (set REDIS_URL to use a real server)", stop, nil
}

// ParseURL reads a Redis URL as Connect reads REDIS_URL: what redis.ParseURL accepts, or a bare
// host:port, taken as redis://host:port. It fails with an error that names REDIS_URL, shows the
// URL with its credentials hidden (Redact), and says what form it wants.
func ParseURL(raw string) (*redis.Options, error) {
	u := raw
	if !strings.Contains(u, "://") {
		u = "redis://" + u // host:port
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL %q: %s; want redis://[user:password@]host:port[/db] or host:port",
			Redact(raw), redactedCause(raw, err))
	}
	return opt, nil
}

// redactedCause is why raw did not parse, without its credentials: net/url's errors repeat the
// whole URL, and may quote a piece of the password.
func redactedCause(raw string, err error) string {
	for {
		// *url.Error's text is `parse "<url>": <cause>`; its cause says what is wrong.
		if u := errors.Unwrap(err); u != nil {
			err = u
			continue
		}
		break
	}
	msg := err.Error()
	start, end, ok := userInfo(raw)
	if !ok || start == end {
		return msg
	}
	secret := raw[start:end]
	msg = strings.ReplaceAll(msg, secret, redacted)
	if _, pass, ok := strings.Cut(secret, ":"); ok && pass != "" {
		msg = strings.ReplaceAll(msg, pass, redacted)
		// A piece of the password quoted in the cause (an invalid escape or port) goes too, also
		// with the separator the parser cut it at (":s3cr3t" as the port of "u:s3cr3t/x@h").
		for _, q := range strings.Split(msg, `"`)[1:] {
			piece := strings.Trim(q, ":@/?#")
			if piece != "" && q != redacted && (strings.Contains(secret, piece) || strings.Contains(piece, pass)) {
				msg = strings.ReplaceAll(msg, `"`+q+`"`, `"`+redacted+`"`)
			}
		}
	}
	return msg
}

// redacted stands for the credentials of a URL.
const redacted = "xxxxx"

// Redact returns the Redis URL u with its credentials shown as xxxxx, for printing:
// redis://user:xxxxx@host:6379/0, redis://:xxxxx@host; user info without a colon (a password
// go-redis sends as the user name) becomes xxxxx whole. A URL without credentials comes back as it
// is. The credentials are found by hand, the text between "//" and the last "@", so a URL too
// malformed to parse is redacted all the same.
func Redact(u string) string {
	start, end, ok := userInfo(u)
	if !ok {
		return u
	}
	info := redacted
	if user, _, hasPass := strings.Cut(u[start:end], ":"); hasPass {
		info = user + ":" + redacted
	}
	return u[:start] + info + u[end:]
}

// userInfo finds where the credentials of URL u start and end: after "//" (or the start) up to the
// last "@". ok is false when u has no "@" there.
func userInfo(u string) (start, end int, ok bool) {
	if i := strings.Index(u, "//"); i >= 0 {
		start = i + 2
	}
	at := strings.LastIndexByte(u[start:], '@')
	if at < 0 {
		return 0, 0, false
	}
	return start, start + at, true
}

// silenceGoRedis drops go-redis's log lines (a failed dial, with go-redis's file and line), once
// per process.
var silenceGoRedis = sync.OnceFunc(func() { redis.SetLogger(quietLogger{}) })

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// Embedded starts an embedded Redis of its own, for a runnable example whose printed output must
// not depend on what a shared server holds, and returns a client of it; stop closes both. It fails
// with the embedded server's error (it could not listen on a loopback port), and stop is then a
// no-op.
func Embedded() (c *redis.Client, stop func(), err error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, func() {}, err
	}
	rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rc, func() { _ = rc.Close(); m.Close() }, nil
}

// MustEmbedded is Embedded for an example's first line: it panics when the embedded Redis cannot
// start, which only a broken machine makes it do.
func MustEmbedded() (c *redis.Client, stop func()) {
	c, stop, err := Embedded()
	if err != nil {
		panic(err)
	}
	return c, stop
}
