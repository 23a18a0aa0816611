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
	return t
}

// sampler reads a process's schedTime every interval until stopped, and
// keeps the largest: a process's threads are gone once it exits.
type sampler struct {
	last schedTime
	stop chan struct{}
	done chan struct{}
}

func sample(pid int, every time.Duration) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			t := readSched(pid) // counters only grow: a lower sum lost exiting threads
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
