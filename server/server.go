package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"percore/httpd"
	"percore/lab"
	"percore/metrics"
	"percore/shard"
)

// Server is a running server: its shards, listeners and access log.
type Server struct {
	Addr     netip.AddrPort // the bound address (the real port when --port 0)
	CPUs     []int
	Lab      *lab.Lab       // the lab --lab built (nil: none); removed when the server stops
	Impaired *lab.Impaired  // the same lab with its impairment bridge (--lab-impair)
	Metrics  netip.AddrPort // the Prometheus endpoint's address (invalid: off)
	TLSAddr  netip.AddrPort // the TLS listeners' address (invalid: no TLS); Addr too when TLS has no port of its own

	group     *shard.Group
	site      *httpd.Site
	log       *os.File
	nativeRun *nativeRun
	metrics   *metrics.Server
	done      chan struct{}
	closeErr  error // from releasing XDP and the lab, after done
}

// Start validates o against the machine (CPUs, port, docroot), builds the
// site (routes registers the handlers on it; nil: none beyond the docroot and
// the built-in hello), binds the listeners and starts the shards. Errors are
// one line naming cause and fix.
func Start(o Options, routes func(*httpd.Site)) (*Server, error) {
	cpus, err := shard.ChooseCPUs(o.SMP, o.CPUSet)
	if err != nil {
		return nil, err
	}
	site, err := httpd.NewSite(httpd.Config{
		Docroot:       o.Docroot,
		MaxBody:       o.MaxBody,
		HeaderTimeout: o.HeaderTimeout,
		IdleTimeout:   o.IdleTimeout,
		BodyTimeout:   o.BodyTimeout,
		CacheSize:     o.CacheSize / int64(len(cpus)), // each shard caches on its own
	})
	if err != nil {
		return nil, fmt.Errorf("docroot %q: %w", o.Docroot, err)
	}
	if routes != nil {
		routes(site)
	}
	s := &Server{CPUs: cpus, site: site, done: make(chan struct{})}
	var logw io.Writer
	if o.AccessLog != "" {
		f, err := os.OpenFile(o.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("access log: %w", err)
		}
		s.log, logw = f, f
	}
	if o.NetworkStack == "native" {
		if err := startNative(o, s, cpus, site, logw); err != nil {
			s.closeLog()
			return nil, err
		}
		return s.started(o)
	}
	fds, tlsFDs, tlsConf, err := s.listenPosix(o, len(cpus))
	if err != nil {
		s.closeLog()
		return nil, err
	}
	taken := make([]bool, len(cpus)) // set by the shard that took ownership of its fds
	g, err := shard.Start(shardConfig(o, cpus), func(sh *shard.Shard) error {
		taken[sh.ID] = true
		cfg := PosixConfig{Site: site, Log: logw}
		lfd := -1
		if fds != nil {
			lfd = fds[sh.ID]
		}
		if tlsFDs != nil {
			cfg.TLS, cfg.TLSListener = tlsConf, tlsFDs[sh.ID]
			cfg.TLSHandshakeTimeout = o.HeaderTimeout // a handshake is part of the first request's header time
		}
		p, err := NewPosix(sh, lfd, cfg, time.Now())
		if err != nil {
			return err
		}
		// Always: handlers may Offload blocking work even without a docroot.
		return attachFileIO(sh, p.Server(), streamFiles(len(cpus)))
	})
	if err != nil {
		for i := range taken {
			if !taken[i] {
				closeFDs(i, fds, tlsFDs)
			}
		}
		s.closeLog()
		return nil, err
	}
	s.group = g
	return s.started(o)
}

// listenPosix opens the posix stack's listeners, n of each: cleartext on
// o.Port unless TLS takes that port, TLS on o.TLSPort or o.Port. It loads the
// certificate first, so that a bad one fails before anything is bound.
func (s *Server) listenPosix(o Options, n int) (fds, tlsFDs []int, conf *tls.Config, err error) {
	if o.TLS.Cert != "" {
		if conf, err = LoadTLS(o.TLS); err != nil {
			return nil, nil, nil, err
		}
	}
	if conf == nil || o.TLSPort >= 0 {
		if fds, s.Addr, err = ListenPosix(netip.AddrPortFrom(o.Address, uint16(o.Port)), n); err != nil {
			return nil, nil, nil, err
		}
	}
	if conf != nil {
		port := o.TLSPort
		if port < 0 {
			port = o.Port
		}
		if tlsFDs, s.TLSAddr, err = ListenPosix(netip.AddrPortFrom(o.Address, uint16(port)), n); err != nil {
			for _, fd := range fds {
				closeFD(fd)
			}
			return nil, nil, nil, err
		}
		if fds == nil {
			s.Addr = s.TLSAddr
		}
	}
	return fds, tlsFDs, conf, nil
}

// closeFDs closes shard i's listener in each list that has one.
func closeFDs(i int, lists ...[]int) {
	for _, fds := range lists {
		if fds != nil {
			closeFD(fds[i])
		}
	}
}

// shardConfig is the shards' loop settings from o.
func shardConfig(o Options, cpus []int) shard.Config {
	return shard.Config{CPUs: cpus, PollMode: o.PollMode, Spin: o.IdlePoll, StopTimeout: o.StopTimeout}
}

// started runs once the shards are up: the Prometheus endpoint, and the
// goroutine that releases everything when the shards have exited.
func (s *Server) started(o Options) (*Server, error) {
	if o.PrometheusAddr != "" {
		m, err := metrics.Listen(o.PrometheusAddr, s.group.Stats)
		if err != nil {
			s.group.Stop()
			s.group.Wait()
			s.release()
			return nil, fmt.Errorf("prometheus endpoint: %w", err)
		}
		s.metrics, s.Metrics = m, m.Addr
	}
	go func() {
		s.group.Wait()
		s.release()
		close(s.done)
	}()
	return s, nil
}

// release frees what outlives the shards: metrics listener, XDP program, lab, log.
func (s *Server) release() {
	if s.metrics != nil {
		s.metrics.Close()
	}
	if s.nativeRun != nil {
		s.closeErr = s.nativeRun.close()
	}
	s.closeLog()
	s.site.Close()
}

// ReloadOnHUP passes on the signals of sig that stop the server and obeys
// SIGHUP (Reload, then said is called) until sig is closed or the server is
// done.
func (s *Server) ReloadOnHUP(sig <-chan os.Signal, said func()) <-chan os.Signal {
	stops := make(chan os.Signal, 2)
	go func() {
		for {
			select {
			case v, ok := <-sig:
				if !ok {
					close(stops)
					return
				}
				if v != syscall.SIGHUP {
					select {
					case stops <- v:
					case <-s.done:
						return
					}
					continue
				}
				s.Reload()
				if said != nil {
					said()
				}
			case <-s.done:
				return
			}
		}
	}()
	return stops
}

// Reload makes every shard forget the docroot files it cached (within a
// second), so that files changed on disk are served; Main calls it on SIGHUP.
func (s *Server) Reload() { s.site.Reload() }

func (s *Server) closeLog() {
	if s.log != nil {
		s.log.Close()
	}
}

// Stop begins a graceful stop: stop accepting, finish responses in flight,
// close. Done is closed when it has finished (within the stop timeout).
func (s *Server) Stop() { s.group.Stop() }

// Done is closed once every shard has exited and the access log is closed.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stats returns every shard's report.
func (s *Server) Stats() []shard.Report { return s.group.Stats() }

// Main runs a server command (httpd, the examples): parse flags, start with
// routes, serve until a signal arrives on sig, stop gracefully. Its lines on
// stderr begin with name. It returns the exit status: 0 after a clean stop (or
// --help), 2 for a bad flag or a failed start (port in use, bad docroot ...),
// 1 if a second signal (or a shard that cannot stop) cut the graceful stop
// short.
func Main(name string, args []string, stderr io.Writer, sig <-chan os.Signal, routes func(*httpd.Site)) int {
	o, err := ParseFlags(args, stderr)
	if errors.Is(err, ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if o.Native.Logf == nil {
		o.Native.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, name+": "+f+"\n", a...) }
	}
	s, err := Start(o, routes)
	if err != nil {
		err = withHint(err, o)
		fmt.Fprintf(stderr, "%s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
		return 2
	}
	url := "http://" + s.Addr.String() + "/"
	switch {
	case s.TLSAddr == s.Addr:
		url = "https://" + s.Addr.String() + "/"
	case s.TLSAddr.IsValid():
		url += " and https://" + s.TLSAddr.String() + "/"
	}
	fmt.Fprintf(stderr, "%s: serving %s with %d shards on cpus %s (%s stack)\n", name,
		url, len(s.CPUs), shard.FormatCPUs(s.CPUs), o.NetworkStack)
	if s.Metrics.IsValid() {
		fmt.Fprintf(stderr, "%s: prometheus metrics on http://%s/metrics\n", name, s.Metrics)
	}
	if s.Lab != nil {
		fmt.Fprint(os.Stdout, reachHelp(s, o.Ports))
	}
	stopStats := make(chan struct{})
	if o.StatsInterval > 0 {
		go printStats(stderr, name, s.group.Stats, o.StatsInterval, stopStats)
	}
	sig = s.ReloadOnHUP(sig, func() {
		fmt.Fprintf(stderr, "%s: SIGHUP: cached files dropped; files changed on disk are served within a second\n", name)
	})
	select {
	case <-sig:
	case <-s.Done():
	}
	close(stopStats)
	fmt.Fprintf(stderr, "%s: stopping: finishing responses in flight (at most %v)\n", name, o.StopTimeout)
	s.Stop()
	// Shards force-close at the stop timeout; the extra bound only guards
	// against a shard that cannot get there (a bug), so the process still ends.
	hard := time.NewTimer(o.StopTimeout + 5*time.Second)
	defer hard.Stop()
	select {
	case <-s.Done():
	case <-sig:
		fmt.Fprintf(stderr, "%s: second signal: exiting without finishing\n", name)
	case <-hard.C:
		fmt.Fprintf(stderr, "%s: shards did not stop within %v; exiting without finishing\n", name, o.StopTimeout+5*time.Second)
	}
	select {
	case <-s.Done():
	default:
		if s.Impaired != nil { // the namespaces would outlive the process
			s.Impaired.Close()
		} else if s.Lab != nil {
			s.Lab.Close()
		}
		return 1
	}
	if s.closeErr != nil {
		fmt.Fprintf(stderr, "%s: cleanup: %s\n", name, strings.ReplaceAll(s.closeErr.Error(), "\n", " "))
	}
	fmt.Fprintf(stderr, "%s: stopped; %s\n", name, shard.Merge(s.group.Final()))
	return 0
}
