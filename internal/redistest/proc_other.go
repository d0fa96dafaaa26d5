//go:build !linux

package redistest

import (
	"os"
	"os/exec"
)

func setDeathSignal(*exec.Cmd) {}

// tell writes msg to stderr; hidden (go test may drop the binary's output) is used on Linux only.
func tell(msg string, hidden bool) { _, _ = os.Stderr.WriteString(msg) }
