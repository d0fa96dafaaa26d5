package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// DurableArgs are redis-server arguments under which a server killed with SIGKILL loses no write
// it acknowledged: an append-only file, fsynced before every reply. Pass them to Start or
// StartProcess for a server that Kill and Restart crash and bring back with its data.
var DurableArgs = []string{"--appendonly", "yes", "--appendfsync", "always"}

// Kill crashes the server with SIGKILL and waits until the process is gone. Unlike Stop it keeps
// the server's directory, so Restart brings the server back with whatever it had persisted
// there. Only for servers started by Start or StartProcess (KindProcess).
func (s *Server) Kill() error {
	if s.cmd == nil || s.exited == nil {
		return fmt.Errorf("redistest: %s server has no process to kill", s.Kind)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: kill redis-server: %w", err)
	}
	<-s.exited
	return nil
}

// Restart starts the server again on its address, in its directory, with its arguments, after a
// Kill (or a crash). It waits until the new process answers and checks that the process answering
// on the port is the new one. The server's clients reconnect on their own. It fails when the
// server still runs, or the new process does not come up within 10 seconds.
func (s *Server) Restart() error {
	if s.cmd == nil || s.exited == nil {
		return fmt.Errorf("redistest: %s server cannot be restarted", s.Kind)
	}
	select {
	case <-s.exited:
	default:
		return errors.New("redistest: restart of a running redis-server; Kill it first")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redistest: no redis-server on PATH: %w", err)
	}
	// The port was just freed; another process may grab it in the gap, so try a few times.
	for try := 0; ; try++ {
		if err = s.start(bin); err == nil {
			if err = s.checkOwnsPort(); err == nil {
				return nil
			}
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if try == 4 {
			return fmt.Errorf("redistest: restart on %s: %w", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond) // a pause between tries, not a wait for a condition
	}
}

// checkOwnsPort verifies that the process answering on s.Addr is s's process.
func (s *Server) checkOwnsPort() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	if want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"; !strings.Contains(info, want) {
		return fmt.Errorf("another process answers on %s", s.Addr)
	}
	return nil
}
