package shard

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Config is the shards' run-time configuration, fixed at Start.
type Config struct {
	CPUs        []int         // one shard per CPU, in this order (a CPU may repeat)
	PollMode    bool          // never block: spin on the pollers and epoll (--poll-mode)
	Spin        time.Duration // how long an idle loop keeps polling before it blocks (0: block at the first idle iteration)
	StopTimeout time.Duration // how long Stop lets shards drain before force-closing

	// Tick is the timer wheel's resolution [1ms]: timers fire up to a tick
	// late, and the loop sleeps to the nanosecond, so a finer tick gives
	// finer wake-ups (an open-loop load generator's send times). The wheel
	// turns once per 4096 ticks; timers further out wake the loop once a
	// turn.
	Tick time.Duration
}

func (c *Config) defaults() {
	if c.Tick == 0 {
		c.Tick = time.Millisecond
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 5 * time.Second
	}
}

// Group is the set of running shards. Its methods are the control plane: they
// may be called from any goroutine and talk to the shards only by message.
type Group struct {
	mu     sync.Mutex // one producer per shard inbox
	shards []*Shard
	done   chan struct{} // closed when every shard has exited
}

// Start creates one shard per CPU. Each shard's goroutine pins itself to its CPU
// and runs setup(shard) there, so per-shard state is allocated on that core's
// thread; setup registers the shard's pollers, sources and stoppers. When every
// setup succeeded the shards are sent the start message; if any failed, all are
// stopped and closed and the first error is returned.
//
// A shard holds its P (a slot of GOMAXPROCS) even while it sleeps (see
// epollWait), so Start raises GOMAXPROCS to at least one more than the
// shards running in the process: the last P is the control plane's
// (signals, stats, the Group's methods), which never waits for a shard.
func Start(cfg Config, setup func(*Shard) error) (*Group, error) {
	cfg.defaults()
	if len(cfg.CPUs) == 0 {
		return nil, fmt.Errorf("no cpus to run shards on")
	}
	g := &Group{done: make(chan struct{})}
	errs := make(chan error, len(cfg.CPUs))
	now := time.Now()
	for i, cpu := range cfg.CPUs {
		s, err := newShard(i, cpu, cfg, now)
		if err != nil {
			for _, s := range g.shards {
				s.closeFDs()
			}
			return nil, err
		}
		g.shards = append(g.shards, s)
	}
	reserveProcs(len(g.shards))
	for _, s := range g.shards {
		go func() {
			err := s.pin()
			if err == nil {
				err = setup(s)
			}
			errs <- err
			s.run()
		}()
	}
	go func() {
		for _, s := range g.shards {
			<-s.done
		}
		reserveProcs(-len(g.shards))
		close(g.done)
	}()
	var first error
	for range g.shards {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		g.stopAll()
		g.Wait()
		return nil, first
	}
	g.mu.Lock()
	for _, s := range g.shards {
		s.send(message{kind: msgStart})
	}
	g.mu.Unlock()
	return g, nil
}

// procs counts the shards running in the process, for GOMAXPROCS.
var procs struct {
	sync.Mutex
	shards int
}

// reserveProcs adds n running shards (n < 0: removes them) and raises
// GOMAXPROCS to one more than the running shards. It never lowers it: the
// rest of the program may have set it higher.
func reserveProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	procs.shards += n
	if runtime.GOMAXPROCS(0) < procs.shards+1 {
		runtime.GOMAXPROCS(procs.shards + 1)
	}
}

func (g *Group) stopAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.shards {
		select {
		case <-s.done:
		default:
			s.send(message{kind: msgStop})
		}
	}
}

// Len is the number of shards.
func (g *Group) Len() int { return len(g.shards) }

// Stop asks every shard to drain (stop accepting, finish responses in flight)
// and returns at once; Wait returns when all have exited, at most the
// configured StopTimeout plus one loop later.
func (g *Group) Stop() { g.stopAll() }

// Wait blocks until every shard has exited.
func (g *Group) Wait() { <-g.done }

// Done is closed when every shard has exited.
func (g *Group) Done() <-chan struct{} { return g.done }

// Stats collects every running shard's report, by message, in shard order.
// A shard that exits before answering is left out.
func (g *Group) Stats() []Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	replies := make([]chan Report, len(g.shards))
	for i, s := range g.shards {
		select {
		case <-s.done:
		default:
			replies[i] = make(chan Report, 1)
			s.send(message{kind: msgStats, reply: replies[i]})
		}
	}
	var rs []Report
	for i, s := range g.shards {
		if replies[i] == nil {
			continue
		}
		select {
		case r := <-replies[i]:
			rs = append(rs, r)
		case <-s.done:
			select {
			case r := <-replies[i]:
				rs = append(rs, r)
			default:
			}
		}
	}
	return rs
}

// Final returns every shard's last report, taken as it exited, after Wait.
func (g *Group) Final() []Report {
	g.Wait()
	rs := make([]Report, len(g.shards))
	for i, s := range g.shards {
		rs[i] = s.final
	}
	return rs
}
