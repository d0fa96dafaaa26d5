package devredis_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/devredis"
)

// TestParseURL: REDIS_URL may be a URL or a bare host:port (taken as redis://host:port); one that
// does not parse is refused with the form wanted, and without its password.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, addr string
		db        int
	}{
		{"localhost:6471", "localhost:6471", 0},
		{"127.0.0.1:6379", "127.0.0.1:6379", 0},
		{"redis://localhost:6471", "localhost:6471", 0},
		{"redis://:pw@localhost:6471/3", "localhost:6471", 3},
	} {
		opt, err := devredis.ParseURL(tc.url)
		if err != nil || opt.Addr != tc.addr || opt.DB != tc.db {
			t.Errorf("ParseURL(%q): %+v, %v; want addr %s db %d", tc.url, opt, err, tc.addr, tc.db)
		}
	}
	if opt, err := devredis.ParseURL("rediss://localhost:6380"); err != nil || opt.TLSConfig == nil || opt.Addr != "localhost:6380" {
		t.Errorf("ParseURL(rediss://localhost:6380): %+v, %v; want TLS to localhost:6380", opt, err)
	}
	if opt, err := devredis.ParseURL("redis://localhost:6380"); err != nil || opt.TLSConfig != nil {
		t.Errorf("ParseURL(redis://localhost:6380): %+v, %v; want no TLS", opt, err)
	}
	for _, bad := range []string{
		"redis://alice:s3cr%zz@localhost:6379/0", // an invalid escape in the password
		"redis://alice:s3cret@localhost:port/0",  // an invalid port
		"http://alice:s3cret@localhost:6379",     // another scheme
		"redis://alice:s3cret@localhost:6379/db", // not a db number
		// A password with a character the URL's syntax takes for a separator: the parser cuts the
		// host at it, and quotes a piece of the password as the port.
		"redis://alice:s3cr3tpw/x@localhost:1",
		"redis://alice:s3cr3t#frag@localhost:1",
		"redis://alice:s3cr3t?x@localhost:1",
		"alice:s3cr3tpw/x@localhost:1", // the same without a scheme
	} {
		_, err := devredis.ParseURL(bad)
		if err == nil {
			t.Errorf("ParseURL(%q): no error", bad)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "REDIS_URL") || !strings.Contains(msg, "want redis://") || strings.Contains(msg, "s3cr") ||
			!strings.Contains(msg, "alice:xxxxx@") {
			t.Errorf("ParseURL(%q): %q; want REDIS_URL, the form wanted, and the URL with its password hidden", bad, msg)
		}
	}
}

// TestRedact: credentials show as xxxxx, whatever the URL's shape.
func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://alice:s3cret@host:6379/0": "redis://alice:xxxxx@host:6379/0",
		"redis://:s3cret@host":             "redis://:xxxxx@host",
		"redis://s3cret@host":              "redis://xxxxx@host",
		"rediss://a:b@c@host:6380":         "rediss://a:xxxxx@host:6380",
		"redis://host:6379":                "redis://host:6379",
		"host:6379":                        "host:6379",
		"alice:s3cret@host:6379":           "alice:xxxxx@host:6379",
	} {
		if got := devredis.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConnect: with REDIS_URL a host:port, Connect gives a client of it and says where with the
// credentials hidden; with a REDIS_URL that does not parse, it fails and its stop is still safe to
// call; without REDIS_URL, an embedded Redis.
func TestConnect(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://alice:s3cret@localhost:6471/0")
	c, where, stop, err := devredis.Connect()
	if err != nil || where != "redis://alice:xxxxx@localhost:6471/0" {
		t.Fatalf("Connect: %q, %v", where, err)
	}
	stop()
	_ = c

	t.Setenv("REDIS_URL", "redis://alice:s3cret@localhost:port")
	_, _, stop, err = devredis.Connect()
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Connect with a bad REDIS_URL: %v", err)
	}
	stop() // defer stop() before checking err must not panic

	t.Setenv("REDIS_URL", "")
	c, where, stop, err = devredis.Connect()
	if err != nil || !strings.HasPrefix(where, "embedded") {
		t.Fatalf("Connect without REDIS_URL: %q, %v", where, err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// childEnv makes the test binary, run again by TestUnreachableLogsNothing, be the program that
// connects.
const childEnv = "DEVREDIS_TEST_CHILD"

// TestUnreachableLogsNothing runs a program that connects to a port where nothing listens: its
// command fails with its own error, and go-redis prints none of its log lines (a failed dial per
// try) on stderr.
func TestUnreachableLogsNothing(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		c, _, stop, err := devredis.Connect()
		defer stop()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = c.Ping(ctx).Err()
		}
		fmt.Println("error:", err)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnreachableLogsNothing$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "REDIS_URL=127.0.0.1:1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "error: dial tcp 127.0.0.1:1") {
		t.Fatalf("stdout %q: want the dial's error", stdout.String())
	}
	if stderr.Len() != 0 {
		t.Fatalf("stderr %q: want nothing from go-redis", stderr.String())
	}
}
