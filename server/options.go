package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"percore/shard"
)

// Options are the httpd command's settings. Flag names follow Seastar's where
// Seastar has one (--smp, --cpuset, --port, --address, --network-stack,
// --poll-mode).
type Options struct {
	SMP           int   // shards; 0: one per CPU of CPUSet
	CPUSet        []int // nil: every CPU the process may use
	Port          int
	Address       netip.Addr
	NetworkStack  string
	PollMode      bool
	IdlePoll      time.Duration // how long an idle shard keeps polling before it sleeps
	Docroot       string
	CacheSize     int64 // bytes of docroot files kept in memory, shared out evenly among the shards
	AccessLog     string
	MaxBody       int64
	HeaderTimeout time.Duration
	IdleTimeout   time.Duration
	BodyTimeout   time.Duration
	StopTimeout   time.Duration // graceful stop bound, then connections are force-closed

	Ports          []int         // every --port (the first is Port); the native stack serves them all
	StatsInterval  time.Duration // one stats line on stderr per interval (0: off)
	PrometheusAddr string        // host:port of the Prometheus endpoint ("": off); --prometheus-port N is ":N"

	// TLS: with TLS.Cert set, connections on TLSPort speak TLS beside
	// cleartext on Port; TLSPort -1 puts TLS on Port instead (no cleartext).
	TLS     TLSFiles
	TLSPort int

	Native NativeOptions // --network-stack native
}

// ErrHelp is returned by ParseFlags for -h/--help (usage already printed).
var ErrHelp = errors.New("help requested")

// ParseFlags parses the command line. Errors are one line naming the flag and
// the fix; usage goes to out only for --help.
func ParseFlags(args []string, out io.Writer) (Options, error) {
	if out == nil {
		out = os.Stderr
	}
	var o Options
	fs := flag.NewFlagSet("httpd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	raw := o.define(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, "usage: httpd [flags]")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return o, ErrHelp
		}
		return o, fmt.Errorf("%s (see --help)", firstLine(err.Error()))
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: give only flags (see --help)", fs.Arg(0))
	}
	for _, check := range []func(*rawFlags) error{o.checkShards, o.checkListen, o.checkStack, o.checkLimits, o.checkTLS} {
		if err := check(raw); err != nil {
			return o, err
		}
	}
	return o, nil
}

// rawFlags holds the flag values that need parsing or checking before they
// become Options.
type rawFlags struct {
	cpuset, address string
	ports           portList
	promPort        int
	idlePollUS      int
	native          *nativeFlags
}

// define declares every flag on fs, bound to o or to the raw values.
func (o *Options) define(fs *flag.FlagSet) *rawFlags {
	r := &rawFlags{}
	fs.IntVar(&o.SMP, "smp", 0, "number of shards, one per core (default: all CPUs of --cpuset)")
	fs.StringVar(&r.cpuset, "cpuset", "", "CPUs to run shards on, e.g. 0-3,6 (default: all allowed)")
	fs.Var(&r.ports, "port", "TCP port to listen on, repeatable or a comma list (default 10000; 0: pick a free one, posix only)")
	fs.StringVar(&r.address, "address", "0.0.0.0", "IP address to listen on")
	fs.StringVar(&o.NetworkStack, "network-stack", "posix", "network stack: posix (kernel sockets) or native (AF_XDP, userspace TCP/IP)")
	fs.DurationVar(&o.StatsInterval, "stats-interval", time.Second, "print requests/s, open connections and drops, total and per shard, on stderr this often (0: off)")
	fs.StringVar(&o.TLS.Cert, "tls-cert", "", "serve HTTPS with this PEM certificate chain (RSA or ECDSA); needs --tls-key")
	fs.StringVar(&o.TLS.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.TLS.OCSP, "tls-ocsp", "", "DER OCSP response to staple in TLS handshakes")
	fs.IntVar(&o.TLSPort, "tls-port", -1, "serve TLS on this port beside cleartext on --port (default: TLS on --port, no cleartext; 0: pick a free one)")
	fs.IntVar(&r.promPort, "prometheus-port", 0, "serve Prometheus metrics on this port of the kernel stack, e.g. 9180 (0: off)")
	r.native = o.Native.flags(fs)
	fs.BoolVar(&o.PollMode, "poll-mode", false, "spin instead of sleeping when idle (lowest latency, one busy core per shard)")
	fs.IntVar(&r.idlePollUS, "idle-poll-time-us", 0, "microseconds an idle shard keeps polling before it sleeps in epoll_wait (0: sleep at once)")
	fs.StringVar(&o.Docroot, "docroot", "", "directory of static files to serve, read from disk as asked for and cached (--cache-size)")
	o.CacheSize = DefaultCacheSize
	fs.Var((*byteSize)(&o.CacheSize), "cache-size", "memory for cached docroot files, all shards together, in bytes or with K, M, G; larger files stream from disk")
	fs.StringVar(&o.AccessLog, "access-log", "", "append a Common Log Format access log to this file")
	fs.Int64Var(&o.MaxBody, "max-body", 1<<20, "largest request body in bytes; larger gets 413")
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", 10*time.Second, "close a connection whose request header takes longer")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 60*time.Second, "close a keep-alive connection idle this long")
	fs.DurationVar(&o.BodyTimeout, "body-timeout", 60*time.Second, "close a connection whose request body takes longer than this after its header")
	fs.DurationVar(&o.StopTimeout, "stop-timeout", 5*time.Second, "on SIGINT/SIGTERM, how long to finish responses in flight before force-closing")
	return r
}

// checkShards: --smp, --cpuset, --idle-poll-time-us.
func (o *Options) checkShards(r *rawFlags) error {
	if o.SMP < 0 {
		return fmt.Errorf("--smp %d: give a positive number of shards, or omit it for one per CPU", o.SMP)
	}
	if r.cpuset != "" {
		set, err := shard.ParseCPUSet(r.cpuset)
		if err != nil {
			return fmt.Errorf("--cpuset %q: %v; write CPUs like 0-3,6", r.cpuset, err)
		}
		o.CPUSet = set
	}
	if r.idlePollUS < 0 || r.idlePollUS > 1000000 {
		return fmt.Errorf("--idle-poll-time-us %d: give 0 to 1000000 microseconds", r.idlePollUS)
	}
	o.IdlePoll = time.Duration(r.idlePollUS) * time.Microsecond
	return nil
}

// checkListen: --port, --address, --stats-interval, --prometheus-port.
func (o *Options) checkListen(r *rawFlags) error {
	if len(r.ports) == 0 {
		r.ports = portList{10000}
	}
	for _, p := range r.ports {
		if p < 0 || p > 65535 {
			return fmt.Errorf("--port %d: choose a port from 0 to 65535", p)
		}
	}
	o.Ports, o.Port = r.ports, r.ports[0]
	if o.StatsInterval < 0 {
		return fmt.Errorf("--stats-interval %v: give a duration such as 1s, or 0 for none", o.StatsInterval)
	}
	if r.promPort < 0 || r.promPort > 65535 {
		return fmt.Errorf("--prometheus-port %d: choose a port from 1 to 65535 (Seastar uses 9180), or 0 for none", r.promPort)
	}
	if r.promPort > 0 {
		o.PrometheusAddr = fmt.Sprintf(":%d", r.promPort)
	}
	addr, err := netip.ParseAddr(r.address)
	if err != nil || addr.Zone() != "" {
		return fmt.Errorf("--address %q: give an IPv4 or IPv6 address such as 0.0.0.0", r.address)
	}
	o.Address = addr
	return nil
}

// checkStack: --network-stack and the flags that belong to one stack.
func (o *Options) checkStack(r *rawFlags) error {
	switch o.NetworkStack {
	case "posix":
		if len(o.Ports) > 1 {
			return fmt.Errorf("--port %v: the posix stack serves one port; give one --port or use --network-stack native", o.Ports)
		}
		return r.native.unused()
	case "native":
		return r.native.check(o)
	}
	return fmt.Errorf("--network-stack %q: choose posix or native", o.NetworkStack)
}

// checkLimits: --max-body, --cache-size and the timeouts.
func (o *Options) checkLimits(*rawFlags) error {
	if o.MaxBody <= 0 {
		return fmt.Errorf("--max-body %d: give a size in bytes, 1 or more", o.MaxBody)
	}
	if o.CacheSize < minCacheSize {
		return fmt.Errorf("--cache-size %d: give at least %d bytes, e.g. 256M", o.CacheSize, minCacheSize)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--header-timeout", o.HeaderTimeout}, {"--idle-timeout", o.IdleTimeout}, {"--body-timeout", o.BodyTimeout}, {"--stop-timeout", o.StopTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: give a positive duration such as 10s", d.name, d.v)
		}
	}
	return nil
}

// checkTLS: --tls-cert, --tls-key, --tls-ocsp, --tls-port. The files are read
// at start.
func (o *Options) checkTLS(*rawFlags) error {
	t := o.TLS
	switch {
	case t.Cert == "" && (t.Key != "" || t.OCSP != "" || o.TLSPort != -1):
		return fmt.Errorf("--tls-key, --tls-ocsp and --tls-port need --tls-cert: give the certificate too")
	case t.Cert != "" && t.Key == "":
		return fmt.Errorf("--tls-cert %q: give its private key with --tls-key", t.Cert)
	case o.TLSPort == 0 && o.NetworkStack != "posix":
		return fmt.Errorf("--tls-port 0: the native stack cannot pick a free port; give a port number")
	case o.TLSPort < -1 || o.TLSPort > 65535:
		return fmt.Errorf("--tls-port %d: choose a port from 0 to 65535", o.TLSPort)
	case o.TLSPort > 0 && slices.Contains(o.Ports, o.TLSPort):
		return fmt.Errorf("--tls-port %d: it is --port too; choose another, or omit --tls-port to serve TLS on --port", o.TLSPort)
	}
	return nil
}

// DefaultCacheSize is --cache-size's default: enough for the hot files of
// most sites, small beside a server's memory.
const DefaultCacheSize = 256 << 20

// minCacheSize is the smallest --cache-size: the cache must hold a few entries.
const minCacheSize = 64 << 10

// byteSize is a size flag: bytes, or a number with K, M or G (powers of 1024).
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(v string) error {
	mult := int64(1)
	switch strings.ToUpper(v[len(v)-min(len(v), 1):]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult > 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size: give bytes, or a number with K, M or G", v)
	}
	*b = byteSize(n * mult)
	return nil
}

// portList is the --port flag: repeatable, each a port or a comma list.
type portList []int

func (p *portList) String() string { return fmt.Sprint([]int(*p)) }

func (p *portList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a port number", f)
		}
		*p = append(*p, n)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
