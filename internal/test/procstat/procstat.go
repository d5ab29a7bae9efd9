// Package procstat reads CPU time and peak memory of processes from /proc, for benchmarks.
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// fields splits /proc/<pid>/stat; the command name (field 2) may contain spaces.
func fields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < 0 {
		return nil
	}
	return append([]string{strings.TrimSpace(s[:open]), s[open : end+1]}, strings.Fields(s[end+1:])...)
}

// CPUSeconds is the user+system CPU of the processes, including that of their children they
// waited for (the commands Ironic runs, for example).
func CPUSeconds(pids ...int) float64 {
	total := 0.0
	for _, pid := range pids {
		f := fields(pid)
		if len(f) < 17 {
			continue
		}
		for _, i := range []int{13, 14, 15, 16} { // utime, stime, cutime, cstime
			v, _ := strconv.ParseFloat(f[i], 64)
			total += v / clockTicks
		}
	}
	return total
}

// PeakRSS is the sum of the processes' peak resident set sizes (VmHWM), in bytes.
func PeakRSS(pids ...int) int64 {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}

// Children lists the direct children of a process whose command name starts with one of names
// (all children when names is empty).
func Children(parent int, names ...string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := fields(pid)
		if len(f) < 4 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[3]); ppid != parent {
			continue
		}
		comm := strings.Trim(f[1], "()")
		if len(names) == 0 {
			pids = append(pids, pid)
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(comm, n) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// LoadAverage is /proc/loadavg's first three fields.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// RSS is the process's current resident set size (VmRSS), in bytes; 0 when it cannot be read.
func RSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
