package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// pinnedEnv marks the re-executed process, so pin runs once.
const pinnedEnv = "PERCORE_PEER_PINNED"

// pin sets GOMAXPROCS to o.smp and, with a cpuset, confines every thread of
// the process to it. The Go runtime has started threads before main runs, and
// sched_setaffinity pins only the calling thread, so pin sets the mask on its
// own locked thread and re-executes the binary from there: the new process
// image inherits that thread's mask for all the threads it will ever start.
func pin(o options) error {
	runtime.GOMAXPROCS(o.smp)
	if len(o.cpuset) == 0 || os.Getenv(pinnedEnv) != "" {
		return nil
	}
	var set unix.CPUSet
	for _, c := range o.cpuset {
		set.Set(c)
	}
	runtime.LockOSThread() // exec replaces the process; nothing unlocks
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPUs %v: %w", o.cpuset, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pin: find own binary: %w", err)
	}
	env := append(os.Environ(), pinnedEnv+"=1")
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("pin: re-exec %s: %w", exe, err)
	}
	return nil
}

// parseCPUSet reads a list like "0-3,6".
func parseCPUSet(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU %q", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad range %q", part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
