package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metalforge/metalforge/internal/scheme"
)

func newScheme() *runtime.Scheme { return scheme.New() }

// childPIDs finds this process's children with one of the given command names (envtest starts
// kube-apiserver and etcd as children).
func childPIDs(names ...string) []int {
	self := os.Getpid()
	var pids []int
	entries, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range entries {
		fields := statFields(path)
		if len(fields) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[3])
		comm := strings.Trim(fields[1], "()")
		for _, n := range names {
			if ppid == self && strings.HasPrefix(comm, n) {
				pid, _ := strconv.Atoi(fields[0])
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// statFields splits /proc/<pid>/stat; the command name (field 2) may contain spaces.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < 0 {
		return nil
	}
	return append([]string{strings.TrimSpace(s[:open]), s[open : close+1]}, strings.Fields(s[close+1:])...)
}

// cpuSeconds is user+system CPU of the processes (clock ticks at the usual 100 Hz).
func cpuSeconds(pids ...int) float64 {
	total := 0.0
	for _, pid := range pids {
		f := statFields("/proc/" + strconv.Itoa(pid) + "/stat")
		if len(f) < 15 {
			continue
		}
		u, _ := strconv.ParseFloat(f[13], 64)
		s, _ := strconv.ParseFloat(f[14], 64)
		total += (u + s) / 100
	}
	return total
}

// vmHWM is the peak resident set size in KiB.
func vmHWM(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	return 0
}
