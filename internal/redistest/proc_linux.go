package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the server when the test process dies, so no redis-server outlives a
// crashed or killed test run.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
