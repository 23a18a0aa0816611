package wreck

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Run drives the server as cfg says and returns the merged result. It returns
// within cfg.Duration plus a few shard ticks, whatever the server does. While
// it runs, GOMAXPROCS is raised by cfg.SMP (one P per shard thread); runs in
// one process should not overlap.
func Run(cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Native.Enabled {
		return runNative(cfg)
	}
	sa, family, err := resolve(cfg.Server)
	if err != nil {
		return nil, err
	}
	cpus := cfg.CPUSet
	if len(cpus) == 0 {
		cpus = processCPUs()
	}
	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)

	var stop atomic.Bool
	shards := make([]*shard, cfg.SMP)
	defer func() {
		for _, s := range shards {
			if s != nil {
				s.close()
			}
		}
	}()
	for i := range shards {
		conns := cfg.Conns / cfg.SMP
		if i < cfg.Conns%cfg.SMP {
			conns++
		}
		budget := int64(-1)
		if cfg.Reqs > 0 {
			budget = cfg.Reqs / int64(cfg.SMP)
			if int64(i) < cfg.Reqs%int64(cfg.SMP) {
				budget++
			}
		}
		if shards[i], err = newShard(i, &cfg, sa, family, conns, budget, req, seqOff, &stop); err != nil {
			return nil, err
		}
	}

	// A shard holds its P even while it waits in epoll_wait (a raw call, see
	// run), so give the rest of the program its usual Ps on top.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + cfg.SMP)
	defer runtime.GOMAXPROCS(procs)

	// Pin each shard's thread, then start them together.
	start, done, err := launch(len(shards), cfg.Duration, &stop, func(i int) error {
		var set unix.CPUSet
		set.Set(cpus[i%len(cpus)])
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("pin shard %d to CPU %d: %w", i, cpus[i%len(cpus)], err)
		}
		// Naps (shard.wait) as long as asked: the default timer slack
		// would stretch each by up to 50us.
		unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		return nil
	}, func(i int, start, end int64) { shards[i].run(start, end) }, nil)
	if err != nil {
		return nil, err
	}
	progressLoop(&cfg, shards, start, &stop, done)
	return result(&cfg, shards, cpus, start), nil
}

// progressLoop waits for the shards, printing a line each second and
// passing cfg.Stop on.
func progressLoop(cfg *Config, accts []*shard, start int64, stop *atomic.Bool, done *sync.WaitGroup) {
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	var last uint64
	lastAt := start
	for {
		select {
		case <-finished:
			return
		case <-cfg.Stop:
			stop.Store(true)
		case <-progress.C:
			if cfg.Progress == nil {
				continue
			}
			var resp, fails, bytes uint64
			for _, s := range accts {
				resp += s.pub.responses.Load()
				fails += s.pub.failures.Load()
				bytes += s.pub.bytes.Load()
			}
			now := mono()
			secs := float64(now-lastAt) / 1e9
			fmt.Fprintf(cfg.Progress, "wreck: %5.1fs %10.0f req/s %8d errors %8.2f MB total\n",
				float64(now-start)/1e9, float64(resp-last)/secs, fails, float64(bytes)/1e6)
			last, lastAt = resp, now
		}
	}
}

// launch starts n shard goroutines, each on an OS thread locked for good (it
// may be pinned or in another namespace, so it exits with the goroutine).
// Each calls setup(i) there; once all have returned, the shards start
// together with run(i, start, end) for duration d, unless a setup failed:
// then none runs, stop is set and launch returns the errors joined after the
// shards have exited. cleanup(i), if not nil, runs last on each shard's
// thread. done ends with the shards.
func launch(n int, d time.Duration, stop *atomic.Bool, setup func(i int) error, run func(i int, start, end int64), cleanup func(i int)) (start int64, done *sync.WaitGroup, err error) {
	var ready sync.WaitGroup
	done = new(sync.WaitGroup)
	startCh := make(chan struct{})
	var end int64
	errs := make([]error, n)
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			errs[i] = setup(i)
			ready.Done()
			<-startCh
			if errs[i] == nil && !stop.Load() {
				run(i, start, end)
			}
			if cleanup != nil {
				cleanup(i)
			}
		}()
	}
	ready.Wait()
	if err := errors.Join(errs...); err != nil {
		stop.Store(true)
		close(startCh)
		done.Wait()
		return 0, nil, err
	}
	start = mono()
	end = start + int64(d)
	close(startCh)
	return start, done, nil
}
