package redistest

import (
	"os"
	"os/exec"
	"syscall"
)

// setDeathSignal kills the server when the test process dies, so no redis-server outlives a
// crashed or killed test run.
func setDeathSignal(cmd *exec.Cmd) {
	if os.Getenv("SRQ_NO_PDEATHSIG") != "" {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
