package wreck

import (
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
	var ready, done sync.WaitGroup
	startCh := make(chan struct{})
	var start, end int64
	pinErrs := make([]error, len(shards))
	for i, s := range shards {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread() // never unlocked: the pinned thread exits with the goroutine
			var set unix.CPUSet
			set.Set(cpus[i%len(cpus)])
			pinErrs[i] = unix.SchedSetaffinity(0, &set)
			// Naps (shard.wait) as long as asked: the default timer slack
			// would stretch each by up to 50us.
			unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
			ready.Done()
			<-startCh
			if !stop.Load() {
				s.run(start, end)
			}
		}()
	}
	ready.Wait()
	for i, err := range pinErrs {
		if err != nil {
			stop.Store(true)
			close(startCh)
			done.Wait()
			return nil, fmt.Errorf("pin shard %d to CPU %d: %w", i, cpus[i%len(cpus)], err)
		}
	}
	start = mono()
	end = start + int64(cfg.Duration)
	close(startCh)

	progressLoop(&cfg, shards, start, &stop, &done)
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
