// Package percore is a shard-per-core HTTP/1.1 server: one shard per CPU core
// (a goroutine locked to an OS thread pinned to that core) with its own event
// loop, connections and HTTP responder, sharing nothing with the others on the
// data path. It serves over kernel sockets (the posix stack, the default) or
// over AF_XDP with its own userspace TCP/IP stack (the native stack).
//
// A program registers handlers on a Server and runs it. With the same
// command-line flags as the httpd command:
//
//	func main() {
//		s := percore.New()
//		s.HandleMethod("GET", "/hello", func(w *percore.ResponseWriter, r *percore.Request) {
//			w.Header("Content-Type", "text/plain")
//			w.WriteString("hello\n")
//		})
//		os.Exit(s.Main("hello")) // serves until SIGINT or SIGTERM
//	}
//
// or from code, with Options (DefaultOptions has the flags' defaults):
//
//	o := percore.DefaultOptions()
//	o.Port = 8080
//	if err := s.Start(o); err != nil { ... }
//	...
//	s.Stop()
//	<-s.Done()
//
// # Routes
//
// Handle serves every method of a pattern, HandleMethod one method (the others
// get 405 with an Allow field; a GET handler also answers HEAD). A pattern is
// an exact path ("/api") or, with a trailing slash, a prefix ("/api/" matches
// "/api/x"). Lookup order: exact routes, the longest prefix, static files of
// Options.Docroot, the built-in hello at "/", then 404. Paths are decoded and
// cleaned before lookup.
//
// # Handlers run on the shard
//
// A handler runs on the shard that owns the connection, between reading that
// shard's packets, so it must not block: no disk or network I/O, no locks held
// for long, no sleeping, no channel waits. While it runs, every other
// connection of that shard waits. The Request and every slice in it are valid
// only until the handler returns (they point into the connection's buffers);
// copy what you keep. The response is what the handler wrote when it returns.
//
// Blocking work belongs on ordinary goroutines that publish their results for
// the handlers to read without waiting: for example a goroutine that queries
// a database or reads files every second and stores an immutable snapshot in
// an atomic.Pointer, which handlers Load. examples/json shows it. A handler
// that needs no such state, like the one above, allocates nothing per request.
// Blocking work for one request (a child process, a slow system call) goes
// to ResponseWriter.Offload: the Job runs on the goroutines that read the
// docroot's files (a few per shard, started with it), and the handler runs
// again once it is done.
package percore

import (
	"errors"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"percore/httpd"
	"percore/server"
	"percore/shard"
)

type (
	// Handler serves one request; see "Handlers run on the shard".
	Handler = httpd.Handler
	// Request is a parsed request: method, target, path, query, headers
	// (Header) and the decoded body, valid until the handler returns.
	Request = httpd.Request
	// ResponseWriter builds the response: WriteHeader sets the status (200
	// by default), Header adds a field, Write and WriteString the body.
	ResponseWriter = httpd.ResponseWriter
	// Job is blocking work a handler hands off the shard with
	// ResponseWriter.Offload (a system call, a child process).
	Job = httpd.Job
	// Options are the server's settings, one per httpd flag.
	Options = server.Options
	// NativeOptions are the settings of the native stack (Options.Native).
	NativeOptions = server.NativeOptions
	// Report is one shard's counters (Stats).
	Report = shard.Report
)

// Server is an HTTP/1.1 server: its routes, and its shards once started.
// Register routes before Start or Main; a Server starts once.
type Server struct {
	routes  []route
	running *server.Server
}

type route struct {
	method, pattern string // method "" for every method
	h               Handler
}

// New returns a server with no routes: it serves the docroot, if the options
// name one, and the built-in hello at "/".
func New() *Server { return &Server{} }

// Handle serves every method of pattern with h. It panics on a pattern that
// does not start with "/" or a nil h (programming errors, found at start-up).
func (s *Server) Handle(pattern string, h Handler) {
	if err := httpd.CheckRoute("", pattern, h); err != nil {
		panic(err)
	}
	s.routes = append(s.routes, route{"", pattern, h})
}

// HandleMethod serves method (e.g. "GET", "POST") of pattern with h; the
// pattern's other methods get 405. It panics like Handle, and on a method that
// is not an HTTP token.
func (s *Server) HandleMethod(method, pattern string, h Handler) {
	if err := httpd.CheckRoute(method, pattern, h); err != nil {
		panic(err)
	}
	s.routes = append(s.routes, route{method, pattern, h})
}

// register puts the routes on the site every shard serves.
func (s *Server) register(site *httpd.Site) {
	for _, r := range s.routes {
		if r.method == "" {
			site.Handle(r.pattern, r.h)
		} else {
			site.HandleMethod(r.method, r.pattern, r.h)
		}
	}
}

// DefaultOptions are the options the httpd command's flags default to: the
// posix stack on port 10000, one shard per CPU.
func DefaultOptions() Options {
	o, err := server.ParseFlags(nil, nil)
	if err != nil {
		panic(err) // the defaults are valid
	}
	return o
}

// ParseFlags parses httpd's command-line flags into Options. Errors are one
// line naming the flag and the fix; --help prints the flags to standard
// error and returns ErrHelp.
func ParseFlags(args []string) (Options, error) { return server.ParseFlags(args, nil) }

// ErrHelp is ParseFlags's answer to --help, after it printed the flags.
var ErrHelp = server.ErrHelp

// Start starts the shards with o and returns once they serve (or with the
// reason they cannot: one line naming cause and fix).
func (s *Server) Start(o Options) error {
	if s.running != nil {
		return errors.New("percore: server already started")
	}
	r, err := server.Start(o, s.register)
	if err != nil {
		return err
	}
	s.running = r
	return nil
}

// Addr is the address the server listens on (the real port when Options.Port
// is 0); valid after Start.
func (s *Server) Addr() netip.AddrPort {
	if s.running == nil {
		return netip.AddrPort{}
	}
	return s.running.Addr
}

// Stop begins a graceful stop: stop accepting, finish the responses in
// flight, close (connections still open at Options.StopTimeout are cut).
func (s *Server) Stop() {
	if s.running != nil {
		s.running.Stop()
	}
}

// Done is closed once every shard has exited and everything is released (at
// once for a server that never started).
func (s *Server) Done() <-chan struct{} {
	if s.running == nil {
		return closed
	}
	return s.running.Done()
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Stats returns each running shard's counters, asked of the shard by message.
func (s *Server) Stats() []Report {
	if s.running == nil {
		return nil
	}
	return s.running.Stats()
}

// Reload makes every shard forget the docroot files it cached, within a
// second, so that files changed on disk are served (SIGHUP in Main).
func (s *Server) Reload() {
	if s.running != nil {
		s.running.Reload()
	}
}

// Merge sums the shards' reports into one, counter by name.
func Merge(rs []Report) Report { return shard.Merge(rs) }

// Main runs the server as a command: it parses httpd's flags from os.Args,
// starts, prints a stats line every --stats-interval, and stops gracefully on
// SIGINT or SIGTERM; SIGHUP makes it serve docroot files changed on disk.
// Lines on stderr begin with name. It returns the exit
// status: 0 after a clean stop, 2 for a bad flag or a failed start, 1 when a
// second signal cut the stop short.
func (s *Server) Main(name string) int {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	return server.Main(name, os.Args[1:], os.Stderr, sig, s.register)
}
