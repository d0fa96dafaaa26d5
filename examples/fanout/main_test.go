package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/devredis"
)

// TestRun: the three orders' summaries, one line of the third not priced, and no key left.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, stop, err := devredis.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var out strings.Builder
	if err := run(ctx, client, &out); err != nil {
		t.Fatal(err)
	}
	want := "order 1001: 2 lines, total 70.95\n" +
		"order 1002: 5 lines, total 102.97\n" +
		"order 1003: 3 lines, total 123.92, not priced: line-2 (espresso-machine is not in the catalog)\n"
	if out.String() != want {
		t.Errorf("output\n%s\nwant\n%s", out.String(), want)
	}
	if keys, err := client.Keys(ctx, "*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("keys left: %v, %v", keys, err)
	}
}
