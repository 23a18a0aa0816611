package httpd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Handler serves one request of a dynamic route. The Request and its slices are
// valid only until the handler returns; the response is written into w. A
// handler runs on the shard's thread: it must not block.
type Handler func(w *ResponseWriter, r *Request)

// Site is the router and the docroot, built once before the shards start and
// read by all of them without locks. It must not be changed (Handle) after
// the first Server is made from it. Each Server caches the docroot's files it
// serves (see fileCache); the Site holds only the docroot's directory.
//
// Lookup order for a request path: exact routes, then the longest prefix route,
// then static files (a directory "/d/" serves "/d/index.html"; "/d" redirects
// with 301 to "/d/"), then the built-in hello at "/", then 404.
type Site struct {
	cfg       Config
	maxIn     int // largest input buffer one request may need
	exact     map[string]*endpoint
	prefix    []prefixRoute // longest first
	root      int           // the docroot directory (O_PATH), -1: none
	noOpenat2 bool          // the kernel lacks openat2 (before Linux 5.6)
	epoch     atomic.Uint64 // bumped by Reload; each Server drops its cache on its next Tick
}

type prefixRoute struct {
	prefix string
	ep     *endpoint
}

// endpoint is what one route pattern serves: one handler for every method
// (Handle), or one per method (HandleMethod), the others answered 405 with
// the Allow field prepared here.
type endpoint struct {
	any     Handler
	methods []methodHandler
	allow   []byte // "GET, HEAD, POST" for the 405 answer
}

type methodHandler struct {
	method string
	h      Handler
}

// handler is the endpoint's handler for method, nil for 405. HEAD is served
// by the GET handler when it has none of its own (RFC 9110 9.3.2).
func (e *endpoint) handler(method []byte) Handler {
	if e.any != nil {
		return e.any
	}
	var get Handler
	for i := range e.methods {
		m := &e.methods[i]
		if m.method == string(method) {
			return m.h
		}
		if m.method == "GET" {
			get = m.h
		}
	}
	if string(method) == "HEAD" {
		return get
	}
	return nil
}

// NewSite opens the docroot (if any; its files are found as they are asked
// for) and registers the built-in "/".
func NewSite(cfg Config) (*Site, error) {
	cfg.fillDefaults()
	s := &Site{
		cfg:   cfg,
		exact: make(map[string]*endpoint),
		root:  -1,
	}
	// Head, decoded body, and the one partial line (chunk-size or trailer) that
	// may follow it undecoded, plus slack.
	s.maxIn = maxRequestLine + 2 + MaxHeaderBytes + 2 + int(cfg.MaxBody) + max(maxChunkLine, MaxHeaderBytes) + 4096
	if cfg.Docroot != "" {
		if err := s.openDocroot(cfg.Docroot); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openDocroot opens the docroot directory; the file jobs open files below it.
func (s *Site) openDocroot(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("docroot %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("docroot: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("docroot %s: not a directory", root)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("docroot %s: %w", root, err)
	}
	s.root = fd
	probe, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	if err == nil {
		unix.Close(probe)
	}
	s.noOpenat2 = err == unix.ENOSYS
	return nil
}

// Reload makes every Server forget the files it cached, on its next Tick
// (within a second), so that changed files are served. Any goroutine may
// call it (a SIGHUP handler).
func (s *Site) Reload() { s.epoch.Add(1) }

// Close releases the docroot directory; call it after every Server has stopped.
func (s *Site) Close() {
	if s.root >= 0 {
		unix.Close(s.root)
		s.root = -1
	}
}

// Config returns the site's configuration with defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// Handle registers h for every method on an exact path ("/api") or, with a
// trailing slash, a prefix ("/api/" matches "/api/x" but not "/api"). It
// replaces what the pattern had. Call before the shards start. It panics on
// a pattern that does not start with "/" or a nil h, as these are
// programming errors found at start-up.
func (s *Site) Handle(pattern string, h Handler) {
	if err := CheckRoute("", pattern, h); err != nil {
		panic(err)
	}
	*s.endpoint(pattern) = endpoint{any: h}
}

// HandleMethod registers h for one method (e.g. "GET", "POST") on pattern,
// beside the pattern's other methods; a request with a method the pattern
// has no handler for is answered 405 with an Allow field. A GET handler also
// serves HEAD (the body is left out) unless HEAD has its own. Call before the
// shards start; it panics like Handle, and on a method that is not a token.
func (s *Site) HandleMethod(method, pattern string, h Handler) {
	if method == "" {
		panic(fmt.Sprintf("httpd: route %q: no method", pattern))
	}
	if err := CheckRoute(method, pattern, h); err != nil {
		panic(err)
	}
	e := s.endpoint(pattern)
	e.any = nil
	replaced := false
	for i := range e.methods {
		if e.methods[i].method == method {
			e.methods[i].h, replaced = h, true
		}
	}
	if !replaced {
		e.methods = append(e.methods, methodHandler{method, h})
	}
	var names []string
	for _, m := range e.methods {
		names = append(names, m.method)
		if m.method == "GET" && !slices.ContainsFunc(e.methods, func(m methodHandler) bool { return m.method == "HEAD" }) {
			names = append(names, "HEAD")
		}
	}
	e.allow = []byte(strings.Join(names, ", "))
}

// CheckRoute reports what is wrong with a route before it is registered: a
// pattern that does not start with "/", a nil handler, or a method ("" for
// every method) that is not an HTTP token.
func CheckRoute(method, pattern string, h Handler) error {
	if !strings.HasPrefix(pattern, "/") {
		return fmt.Errorf("httpd: route %q: a pattern starts with /", pattern)
	}
	if h == nil {
		return fmt.Errorf("httpd: route %q: nil handler", pattern)
	}
	if len(method) > maxMethod {
		return fmt.Errorf("httpd: route %q: method %q is too long", pattern, method)
	}
	for i := range len(method) {
		if !isToken(method[i]) {
			return fmt.Errorf("httpd: route %q: method %q is not a token", pattern, method)
		}
	}
	return nil
}

// endpoint returns pattern's endpoint, made empty if it has none.
func (s *Site) endpoint(pattern string) *endpoint {
	if !strings.HasSuffix(pattern, "/") {
		if e := s.exact[pattern]; e != nil {
			return e
		}
		e := &endpoint{}
		s.exact[pattern] = e
		return e
	}
	for i := range s.prefix {
		if s.prefix[i].prefix == pattern {
			return s.prefix[i].ep
		}
	}
	e := &endpoint{}
	s.prefix = append(s.prefix, prefixRoute{pattern, e})
	sort.SliceStable(s.prefix, func(i, j int) bool { return len(s.prefix[i].prefix) > len(s.prefix[j].prefix) })
	return e
}

// lookup finds the dynamic route of a clean, decoded path, nil when none (the
// docroot or the built-in hello then). It does not allocate: map lookups
// keyed by string(path) are optimised by the compiler.
func (s *Site) lookup(path []byte) *endpoint {
	if e, ok := s.exact[string(path)]; ok {
		return e
	}
	for i := range s.prefix {
		p := s.prefix[i].prefix
		if len(path) >= len(p) && string(path[:len(p)]) == p {
			return s.prefix[i].ep
		}
	}
	return nil
}
