package wreck

import (
	"fmt"
	"sync/atomic"
	"time"

	"percore/shard"
)

// Run drives the server as cfg says and returns the merged result. It returns
// within cfg.Duration plus a few shard ticks, whatever the server does. Its
// shards raise GOMAXPROCS as shard.Start does, and leave it raised.
func Run(cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Workload == WorkloadSpecweb99 {
		return runSpecweb(cfg)
	}
	if cfg.Native.Enabled {
		return runNative(cfg)
	}
	if cfg.TLS.Enabled {
		return runTLS(cfg)
	}
	sa, family, err := resolve(cfg.Server)
	if err != nil {
		return nil, err
	}
	if err := raiseFileLimit(uint64(cfg.Conns) + fileSlack); err != nil {
		return nil, err
	}
	cfg.Duration += cfg.Warmup // the shards' deadline
	req, seqOff := buildRequest(&cfg, cfg.CheckSeq)
	r := newRun(&cfg)
	g, err := r.start(func(sh *shard.Shard, a *acct) error {
		newKClient(sh, a, sa, family, req, seqOff)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.wait(g)
	return r.result(), nil
}

// run is one run's control plane: the shards' accounts, read once the
// shards have exited (pub meanwhile), and how many shards are still running.
type run struct {
	cfg   *Config
	cpus  []int // shard i's CPU
	accts []*acct
	left  atomic.Int32
	ended chan struct{} // closed when every shard has ended its run
	began int64         // when the shards started, for the progress line
}

// newRun splits the connections and the request budget over the shards.
func newRun(cfg *Config) *run {
	r := &run{cfg: cfg, cpus: make([]int, cfg.SMP), accts: make([]*acct, cfg.SMP), ended: make(chan struct{})}
	r.left.Store(int32(cfg.SMP))
	for i := range cfg.SMP {
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
		r.accts[i] = newAcct(i, cfg, conns, budget)
		r.accts[i].ended = r.shardEnded
	}
	return r
}

// shardEnded is called by each shard as its run ends (budget, deadline).
func (r *run) shardEnded() {
	if r.left.Add(-1) == 0 {
		close(r.ended)
	}
}

// start starts the shards, shard i on CPU i of cfg.CPUSet (or of the
// process's CPUs), wrapping, with setup(shard, its account) on the shard's
// thread. The shards begin their runs together, at their first loop
// iteration.
func (r *run) start(setup func(*shard.Shard, *acct) error) (*shard.Group, error) {
	cpus := r.cfg.CPUSet
	if len(cpus) == 0 {
		var err error
		if cpus, err = shard.AllowedCPUs(); err != nil {
			return nil, err
		}
	}
	for i := range r.cpus {
		r.cpus[i] = cpus[i%len(cpus)]
	}
	g, err := shard.Start(shard.Config{CPUs: r.cpus, Tick: wheelTick, StopTimeout: time.Second}, func(sh *shard.Shard) error {
		return setup(sh, r.accts[sh.ID])
	})
	r.began = mono()
	return g, err
}

// wait is the control plane while the shards run: a progress line each
// second, until every shard has ended its run or cfg.Stop is closed; then it
// stops the shards and waits for them. The shards end their runs at the
// deadline on their own timers; the control plane stops them a few ticks
// later whatever they do.
func (r *run) wait(g *shard.Group) {
	cfg := r.cfg
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	deadline := time.NewTimer(cfg.Duration + 10*tick)
	defer deadline.Stop()
	var last uint64
	lastAt := r.began
loop:
	for {
		select {
		case <-r.ended:
			break loop
		case <-cfg.Stop:
			break loop
		case <-deadline.C:
			break loop
		case <-progress.C:
			if cfg.Progress == nil {
				continue
			}
			var resp, fails, bytes uint64
			for _, a := range r.accts {
				resp += a.pub.responses.Load()
				fails += a.pub.failures.Load()
				bytes += a.pub.bytes.Load()
			}
			if resp < last {
				last = 0 // the warm-up ended: the counts start again
			}
			now := mono()
			secs := float64(now-lastAt) / 1e9
			fmt.Fprintf(cfg.Progress, "wreck: %5.1fs %10.0f req/s %8d errors %8.2f MB total\n",
				float64(now-r.began)/1e9, float64(resp-last)/secs, fails, float64(bytes)/1e6)
			last, lastAt = resp, now
		}
	}
	g.Stop()
	g.Wait()
}
