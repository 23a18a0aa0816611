package specsearch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// schedTime is a process's time on a CPU and waiting for one (runnable,
// on a run queue), summed over its threads: /proc/PID/task/*/schedstat's
// first two fields, in ns. On a shared machine the wait says how much of
// the run the process could not run for other work.
type schedTime struct{ run, wait time.Duration }

func readSched(pid int) schedTime {
	var t schedTime
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	t.add(files)
	return t
}

// readGroupSched is readSched summed over the processes of group pgid
// (nginx's workers, specweb's CGI programs): those alive when it reads.
func readGroupSched(pgid int) schedTime {
	var t schedTime
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so count
		// fields after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) < 3 || fs[2] != strconv.Itoa(pgid) {
			continue
		}
		files, _ := filepath.Glob(filepath.Dir(st) + "/task/*/schedstat")
		t.add(files)
	}
	return t
}

// add sums the schedstat files of threads into t.
func (t *schedTime) add(files []string) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fs := strings.Fields(string(b))
		if len(fs) < 2 {
			continue
		}
		r, _ := strconv.ParseInt(fs[0], 10, 64)
		w, _ := strconv.ParseInt(fs[1], 10, 64)
		t.run += time.Duration(r)
		t.wait += time.Duration(w)
	}
}

// sampler reads a schedTime (a process's, a group's) every interval until
// stopped, and keeps the largest: a process's threads are gone once it
// exits.
type sampler struct {
	last schedTime
	stop chan struct{}
	done chan struct{}
}

func sample(read func() schedTime, every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			t := read() // counters only grow: a lower sum lost exiting threads
			s.last.run, s.last.wait = max(s.last.run, t.run), max(s.last.wait, t.wait)
			select {
			case <-s.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return s
}

// end stops the sampler and returns its last reading.
func (s *sampler) end() schedTime {
	close(s.stop)
	<-s.done
	return s.last
}

// load1 is the machine's 1-minute load average (0 if unknown).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}
