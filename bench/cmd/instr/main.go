// Command instr counts the instructions redis-server executes per task for srq's hot calls,
// under valgrind's callgrind. Instruction counts do not drift with a shared VM's speed, so a
// change to the scripts can be judged by a difference of 1 %, where timings on the same machine
// wander by tens of percent between runs.
//
//	go run ./bench/cmd/instr                      # every workload, with EVALSHA and with functions
//	go run ./bench/cmd/instr -workload ackfetch   # one
//	go run ./bench/cmd/instr -scripts function    # only with functions (engine.Config.Scripts)
//
// It needs valgrind and a redis-server binary. For each workload it starts its own redis-server
// under callgrind on a free loopback port, seeds a queue, warms up, zeroes the counters
// (callgrind_control -z), runs the measured calls, dumps the counters (callgrind_control -d) and
// divides their total by the tasks. The total covers everything the server did meanwhile:
// reading the calls, the scripts, the commands they run and writing the replies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// quiet drops go-redis's log lines: dial errors are expected while valgrind starts the server.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	log.SetFlags(0)
	redis.SetLogger(quiet{})
	server := flag.String("redis-server", "redis-server", "the redis-server binary to run under callgrind")
	which := flag.String("workload", "all", "one of "+strings.Join(workloadNames(), ", ")+", or all")
	calls := flag.Int("calls", 0, "measured steps per workload, tasks for those that count tasks (0: the workload's default)")
	keep := flag.String("keep", "", "a directory to keep the callgrind files in (for callgrind_annotate)")
	modes := flag.String("scripts", "eval,function", "how the engine runs its scripts (engine.ScriptMode), comma-separated: each workload runs in each")
	flag.Parse()

	var run []workload
	for _, w := range workloads {
		if *which == "all" || *which == w.name {
			run = append(run, w)
		}
	}
	if len(run) == 0 {
		log.Fatalf("instr: unknown workload %q (want one of %s, or all)", *which, strings.Join(workloadNames(), ", "))
	}
	if *calls < 0 {
		log.Fatalf("instr: negative -calls %d", *calls)
	}
	for _, tool := range []string{"valgrind", "callgrind_control", *server} {
		if _, err := exec.LookPath(tool); err != nil {
			log.Fatalf("instr: %v (install valgrind and redis-server)", err)
		}
	}
	var ms []engine.ScriptMode
	for _, m := range strings.Split(*modes, ",") {
		switch m := engine.ScriptMode(strings.TrimSpace(m)); m {
		case engine.ScriptsEval, engine.ScriptsFunction:
			ms = append(ms, m)
		default:
			log.Fatalf("instr: unknown -scripts %q (want %q or %q)", m, engine.ScriptsEval, engine.ScriptsFunction)
		}
	}
	ctx := context.Background()
	for _, w := range run {
		n := w.calls
		if *calls > 0 {
			n = *calls
		}
		var first float64
		for i, m := range ms {
			if w.modeless && i > 0 {
				break
			}
			// The workloads' engines take their mode from the environment (engine.ScriptsDefault).
			if err := os.Setenv("SRQ_SCRIPTS", string(m)); err != nil {
				log.Fatal(err)
			}
			perTask, scripts, err := measure(ctx, *server, w, n, *keep, string(m))
			if err != nil {
				log.Fatalf("instr: %s (%s): %v", w.name, m, err)
			}
			label, ratio := string(m), ""
			if w.modeless {
				label = "-"
			}
			if i == 0 {
				first = perTask
			} else {
				ratio = fmt.Sprintf(", %.3f × %s", perTask/first, ms[0])
			}
			fmt.Printf("%-16s %-8s %9.0f instructions per task%s, %.3f script calls per task (%d %s, %s)\n",
				w.name, label, perTask, ratio, scripts, n, w.unit, w.about)
		}
	}
}

// measure runs workload w for calls calls on a redis-server of its own under callgrind and
// returns the server's instructions per task and the script calls per task (INFO commandstats).
func measure(ctx context.Context, server string, w workload, calls int, keep, mode string) (perTask, scripts float64, err error) {
	dir, err := os.MkdirTemp("", "srq-instr-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	valgrind := []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + filepath.Join(dir, "callgrind.out")}
	s, err := redistest.StartUnder(valgrind, server, time.Minute)
	if err != nil {
		return 0, 0, err
	}
	defer s.Stop()
	client := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute, MaxRetries: -1})
	defer client.Close()
	// The script calls between -z and -d, from INFO commandstats read before the counters are
	// zeroed and after they are dumped, so the INFOs are not among the instructions counted.
	var evals int64
	control := func(op string) error {
		if op == "-z" {
			n, err := scriptCalls(ctx, client)
			if err != nil {
				return err
			}
			evals -= n
		}
		out, err := exec.CommandContext(ctx, "callgrind_control", op, strconv.Itoa(s.Pid())).CombinedOutput()
		if err != nil {
			return fmt.Errorf("callgrind_control %s: %v: %s", op, err, out)
		}
		if op == "-d" {
			n, err := scriptCalls(ctx, client)
			if err != nil {
				return err
			}
			evals += n
		}
		return nil
	}
	tasks, err := w.run(ctx, client, "instr", calls, control)
	if err != nil {
		return 0, 0, err
	}
	dump := filepath.Join(dir, "callgrind.out.1") // the first dump: callgrind_control -d
	total, err := readTotal(dump)
	if err != nil {
		return 0, 0, err
	}
	if keep != "" {
		if err := copyFile(dump, filepath.Join(keep, "callgrind."+w.name+"."+mode+".out")); err != nil {
			return 0, 0, err
		}
	}
	return float64(total) / float64(tasks), float64(evals) / float64(tasks), nil
}

// scriptCalls returns the server's script calls so far (EVALSHA, EVAL, FCALL and FCALL_RO) from
// INFO commandstats.
func scriptCalls(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	st := redistest.ParseCommandStats(info)
	return st["evalsha"].Calls + st["eval"].Calls + st["fcall"].Calls + st["fcall_ro"].Calls, nil
}

// readTotal returns the instructions a callgrind dump counted (its "summary:" line).
func readTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "summary:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New(path + ": no summary line")
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
