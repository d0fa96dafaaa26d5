// Command srq inspects and steers srq queues: stats, partitions, leased tasks, dead letters,
// pause and resume, one task by id, cancellation, flows, the event stream, a live view, and the
// web dashboard.
//
//	srq --queue emails stats
//	srq --queue emails partitions --by age
//	srq --queue emails dead list --error timeout
//	srq --queue emails dead requeue --all --yes
//	srq --queue emails watch --interval 2s
//	srq --queue orders flow order-1001
//	srq --queue orders events --follow
//	srq web --read-only                # the dashboard on 127.0.0.1:8080
//
// Run "srq help" for every command and flag; docs/cli.md documents the JSON output of --json.
// Exit codes: 0 success, 1 runtime error, 2 usage error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
