package httpd

import (
	"fmt"
	"sort"
	"strings"
)

// Handler serves one request of a dynamic route. The Request and its slices are
// valid only until the handler returns; the response is written into w. A
// handler runs on the shard's thread: it must not block.
type Handler func(w *ResponseWriter, r *Request)

// Site is the router and static file cache, built once before the shards start
// and read by all of them without locks. It must not be changed (Handle) after
// the first Server is made from it.
//
// Lookup order for a request path: exact routes, then the longest prefix route,
// then static files (a directory "/d/" serves "/d/index.html"; "/d" redirects
// with 301 to "/d/"), then the built-in hello at "/", then 404.
type Site struct {
	cfg    Config
	maxIn  int // largest input buffer one request may need
	exact  map[string]Handler
	prefix []prefixRoute // longest first
	static map[string]*staticFile
	dirs   map[string]struct{} // "/d" for each directory with an index.html
}

type prefixRoute struct {
	prefix string
	h      Handler
}

// NewSite loads the docroot (if any) into memory and registers the built-in "/".
func NewSite(cfg Config) (*Site, error) {
	cfg.fillDefaults()
	s := &Site{
		cfg:    cfg,
		exact:  make(map[string]Handler),
		static: make(map[string]*staticFile),
		dirs:   make(map[string]struct{}),
	}
	// Head, decoded body, and the one partial line (chunk-size or trailer) that
	// may follow it undecoded, plus slack.
	s.maxIn = maxRequestLine + 2 + MaxHeaderBytes + 2 + int(cfg.MaxBody) + max(maxChunkLine, MaxHeaderBytes) + 4096
	if cfg.Docroot != "" {
		if err := s.loadDocroot(cfg.Docroot); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Config returns the site's configuration with defaults filled in.
func (s *Site) Config() Config { return s.cfg }

// Handle registers h for an exact path ("/api") or, with a trailing slash, a
// prefix ("/api/" matches "/api/x" but not "/api"). Call before the shards
// start. It panics on a pattern that does not start with "/" or a nil h, as
// these are programming errors found at start-up.
func (s *Site) Handle(pattern string, h Handler) {
	if !strings.HasPrefix(pattern, "/") || h == nil {
		panic(fmt.Sprintf("httpd: bad route %q", pattern))
	}
	if !strings.HasSuffix(pattern, "/") {
		s.exact[pattern] = h
		return
	}
	for i := range s.prefix {
		if s.prefix[i].prefix == pattern {
			s.prefix[i].h = h
			return
		}
	}
	s.prefix = append(s.prefix, prefixRoute{pattern, h})
	sort.SliceStable(s.prefix, func(i, j int) bool { return len(s.prefix[i].prefix) > len(s.prefix[j].prefix) })
}

// route is what a path resolves to.
type route struct {
	h        Handler
	file     *staticFile
	redirect bool // directory without its trailing slash
	hello    bool
}

// lookup resolves a clean, decoded path. It does not allocate: map lookups
// keyed by string(path) are optimised by the compiler.
func (s *Site) lookup(path []byte) route {
	if h, ok := s.exact[string(path)]; ok {
		return route{h: h}
	}
	for i := range s.prefix {
		p := s.prefix[i].prefix
		if len(path) >= len(p) && string(path[:len(p)]) == p {
			return route{h: s.prefix[i].h}
		}
	}
	if f, ok := s.static[string(path)]; ok {
		return route{file: f}
	}
	if _, ok := s.dirs[string(path)]; ok {
		return route{redirect: true}
	}
	if len(path) == 1 && path[0] == '/' {
		return route{hello: true}
	}
	return route{}
}
