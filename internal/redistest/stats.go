package redistest

import (
	"strconv"
	"strings"
)

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls       int64
	Usec        int64 // microseconds spent in the command, scripts included for EVALSHA
	FailedCalls int64
}

// ParseCommandStats reads the "cmdstat_<name>:calls=…,usec=…,…" lines of INFO commandstats;
// other lines and fields are ignored.
func ParseCommandStats(info string) map[string]CommandStat {
	out := map[string]CommandStat{}
	for name, v := range infoFields(info) {
		name, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		var s CommandStat
		for kv := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch k {
			case "calls":
				s.Calls = n
			case "usec":
				s.Usec = n
			case "failed_calls":
				s.FailedCalls = n
			}
		}
		out[name] = s
	}
	return out
}

// MainThreadCPU reads from INFO cpu the CPU time, user plus system, of the server's main thread
// in microseconds (Redis 7: used_cpu_*_main_thread; older servers: the whole process's). Unlike
// commandstats, which times commands by the clock, it does not grow while the server waits for a
// CPU on a busy machine. It is 0 when info holds no cpu section.
func MainThreadCPU(info string) int64 {
	f := infoFields(info)
	num := func(k string) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
	secs := num("used_cpu_user") + num("used_cpu_sys")
	if _, ok := f["used_cpu_user_main_thread"]; ok {
		secs = num("used_cpu_user_main_thread") + num("used_cpu_sys_main_thread")
	}
	return int64(secs * 1e6)
}

// infoFields parses the "name:value" lines of an INFO reply.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}
