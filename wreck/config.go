package wreck

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"percore/shard"
)

// Config is one run of wreck, as the flags give it.
type Config struct {
	Server    string        // host:port to connect to
	SMP       int           // client shards, each one pinned thread and one epoll
	CPUSet    []int         // CPUs for the shards, shard i on CPUSet[i%len]; nil: the process's CPUs
	Conns     int           // connections in total, spread over the shards
	Duration  time.Duration // stop after this long
	Reqs      int64         // stop after this many requests complete (0: no cap)
	Pipeline  int           // requests in flight per connection (a batch written at once in closed loop)
	Path      string        // request target
	Headers   []string      // extra "Name: value" request headers
	KeepAlive bool          // false: one connection per request (connection rate)
	Rate      float64       // open loop: requests per second in total (0: closed loop)
	// ConnectRate paces connects: at most this many a second in total,
	// first connects and reconnects alike (0: as fast as they go).
	ConnectRate float64
	Timeout     time.Duration // per request (and per connect)
	CheckSeq    bool          // stamp X-Wreck-Seq on each request; responses must echo it in order
	MaxHead     int           // largest response header section accepted (0: 16 KiB)
	// Sources are the client's own addresses (--host-ipv4-addr): on the
	// native stack its address and aliases, on kernel sockets the kernel's
	// addresses each connection is bound to in turn (nil: the kernel picks).
	Sources []netip.Addr
	Native  NativeConfig // --network-stack native (native.go); zero: kernel sockets
	TLS     TLSConfig    // --tls (tls.go)

	// The SPECweb99 workload (specweb_run.go): Conns paced users in place
	// of Path, Pipeline and Rate.
	Workload string        // "" (one request, Path) or WorkloadSpecweb99
	Warmup   time.Duration // run this long before measuring
	Seed     uint64        // the users' draws
	FileSet  int           // the connections the file set was generated for (0: Conns)
	// StaticOnly draws only the static GETs (same files, pacing and checks):
	// for servers without SPECweb99's dynamic modules.
	StaticOnly bool

	Progress io.Writer       // a progress line each second (nil: none)
	Stop     <-chan struct{} // closing it ends the run early (nil: never)
}

// DefaultConfig returns the flag defaults.
func DefaultConfig() Config {
	return Config{
		SMP:       1,
		Conns:     64,
		Duration:  10 * time.Second,
		Pipeline:  1,
		Path:      "/",
		KeepAlive: true,
		Timeout:   2 * time.Second,
	}
}

// maxConns bounds --conn (each slot holds buffers and rings for the whole run).
const maxConns = 1 << 20

// seqHeader is the request and response header that carries the sequence number
// when Config.CheckSeq is set: 16 lower-case hex digits, echoed by the server.
const seqHeader = "x-wreck-seq"

// A ConfigError is a Config that cannot run: Field names the setting at
// fault as Config spells it ("Conns", "TLS.CA"), and Reason says why and
// how to fix it, naming other settings the same way. A command that set
// the fields from flags puts its flags' names in their place.
type ConfigError struct {
	Field  string
	Reason string
	Err    error // what the setting failed with, where the system refused it (its text is in Reason); else nil
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Reason }

func (e *ConfigError) Unwrap() error { return e.Err }

// badField is a ConfigError.
func badField(field, format string, a ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
}

// refused is a ConfigError for a setting the system refused with err.
func refused(err error, field, format string, a ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, a...), Err: err}
}

// validate checks c and says which setting is wrong and how to fix it.
func (c *Config) validate() error {
	switch {
	case c.Server == "":
		return badField("Server", "required: give the server as host:port")
	case c.SMP < 1:
		return badField("SMP", "%d: need at least 1 shard", c.SMP)
	case c.Conns > maxConns:
		return badField("Conns", "%d: at most %d", c.Conns, maxConns)
	case c.Conns < c.SMP:
		return badField("Conns", "%d is less than SMP %d: each shard needs a connection; raise Conns or lower SMP", c.Conns, c.SMP)
	case c.Duration <= 0:
		return badField("Duration", "%v: must be positive", c.Duration)
	case c.Reqs < 0:
		return badField("Reqs", "%d: must be 0 (no cap) or positive", c.Reqs)
	case c.Reqs > 0 && c.Reqs < int64(c.SMP):
		return badField("Reqs", "%d is less than SMP %d: lower SMP", c.Reqs, c.SMP)
	case c.Pipeline < 1 || c.Pipeline > 1024:
		return badField("Pipeline", "%d: must be 1..1024", c.Pipeline)
	case !c.KeepAlive && c.Pipeline > 1:
		return badField("Pipeline", "needs KeepAlive: set KeepAlive or Pipeline 1")
	case c.Rate < 0:
		return badField("Rate", "%v: must be 0 (closed loop) or positive", c.Rate)
	case c.ConnectRate < 0:
		return badField("ConnectRate", "%v: must be 0 (unpaced) or positive", c.ConnectRate)
	case c.ConnectRate > 0 && !c.KeepAlive:
		return badField("ConnectRate", "paces connections kept alive (KeepAlive): one connection per request is paced by Rate")
	case c.Timeout <= 0:
		return badField("Timeout", "%v: must be positive", c.Timeout)
	case !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, " \r\n\t"):
		return badField("Path", "%q: must start with / and hold no spaces or line breaks", c.Path)
	case c.MaxHead < 0:
		return badField("MaxHead", "%d: must not be negative", c.MaxHead)
	}
	for _, h := range c.Headers {
		i := strings.IndexByte(h, ':')
		if i <= 0 || strings.ContainsAny(h, "\r\n") || strings.ContainsAny(h[:i], " \t") {
			return badField("Headers", "%q: want \"Name: value\" on one line", h)
		}
	}
	if len(c.CPUSet) > 0 {
		allowed, err := shard.AllowedCPUs()
		if err != nil {
			return err
		}
		for _, cpu := range c.CPUSet {
			if !slices.Contains(allowed, cpu) {
				return badField("CPUSet", "CPU %d is not available to this process (allowed: %s)", cpu, shard.FormatCPUs(allowed))
			}
		}
	}
	if err := c.validateWorkload(); err != nil {
		return err
	}
	if err := c.Native.validate(c); err != nil {
		return err
	}
	if err := c.TLS.validate(c); err != nil {
		return err
	}
	if !c.Native.Enabled {
		if err := checkFileLimit(uint64(c.Conns) + fileSlack); err != nil {
			return badField("Conns", "%d: %v: lower Conns, raise the hard limit, or use Native.Enabled (no descriptor a connection)", c.Conns, err)
		}
	}
	host, port, err := net.SplitHostPort(c.Server)
	if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return badField("Server", "%q: want host:port, e.g. 127.0.0.1:8080", c.Server)
	}
	return nil
}

// headLimit is the largest response header section a parser accepts:
// MaxHead, or the default when it is 0.
func (c *Config) headLimit() int {
	if c.MaxHead == 0 {
		return defaultMaxHead
	}
	return c.MaxHead
}

// fileSlack is the descriptors a kernel-socket run needs beside one a
// connection: epoll, eventfds, stdio, the runtime's.
const fileSlack = 64

// checkFileLimit reports whether the hard limit on open files allows need.
func checkFileLimit(need uint64) error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && need > lim.Max {
		return fmt.Errorf("needs %d open files, the hard limit is %d", need, lim.Max)
	}
	return nil
}

// raiseFileLimit raises the soft limit on open files to need (within the
// hard limit, which checkFileLimit checked: a process may do that
// unprivileged).
func raiseFileLimit(need uint64) error {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil || need <= lim.Cur {
		return nil
	}
	lim.Cur = min(need, lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise the open file limit to %d: %v", need, err)
	}
	return nil
}

// resolve turns a validated Server into a socket address (once, before the
// shards start).
func resolve(server string) (unix.Sockaddr, int, error) {
	host, port, _ := net.SplitHostPort(server) // checked by validate
	p, _ := strconv.Atoi(port)
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil, 0, badField("Server", "%q: cannot resolve host: %v", server, err)
	}
	for _, ip := range ips {
		if ip4 := ip.To4(); ip4 != nil {
			sa := &unix.SockaddrInet4{Port: p}
			copy(sa.Addr[:], ip4)
			return sa, unix.AF_INET, nil
		}
	}
	sa := &unix.SockaddrInet6{Port: p}
	copy(sa.Addr[:], ips[0].To16())
	return sa, unix.AF_INET6, nil
}
