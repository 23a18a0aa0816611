package httpd

import (
	"bytes"
	"strconv"
	"unsafe"
)

// ResponseWriter builds a dynamic response for the connection's output arena.
// It is owned by the Conn and valid only while the handler runs.
type ResponseWriter struct {
	c      *Conn
	status int
	hdr    []byte // "Name: value\r\n" lines
	body   []byte
}

// Header adds a response header. Fields that the server itself manages
// (Content-Length, Transfer-Encoding, Connection, Date, Server) and names or
// values with control characters (response splitting) are ignored.
func (w *ResponseWriter) Header(name, value string) {
	if len(name) == 0 {
		return
	}
	for i := range len(name) {
		if !isToken(name[i]) {
			return
		}
	}
	for i := range len(value) {
		if b := value[i]; b < ' ' && b != '\t' || b == 0x7f {
			return
		}
	}
	switch {
	case equalFoldString(name, "content-length"), equalFoldString(name, "transfer-encoding"),
		equalFoldString(name, "connection"), equalFoldString(name, "date"), equalFoldString(name, "server"):
		return
	}
	w.hdr = append(w.hdr, name...)
	w.hdr = append(w.hdr, ": "...)
	w.hdr = append(w.hdr, value...)
	w.hdr = append(w.hdr, "\r\n"...)
}

// HeaderBytes is Header with the value in bytes: a value made per request (a
// cookie) then costs no allocation. The value is copied.
func (w *ResponseWriter) HeaderBytes(name string, value []byte) {
	// Header only copies value and keeps no reference to it.
	w.Header(name, unsafe.String(unsafe.SliceData(value), len(value)))
}

// WriteHeader sets the status code (default 200). Codes outside 200-599 are
// ignored: informational responses are the server's business.
func (w *ResponseWriter) WriteHeader(code int) {
	if code >= 200 && code <= 599 {
		w.status = code
	}
}

// Write appends body bytes.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

// WriteString appends body bytes.
func (w *ResponseWriter) WriteString(s string) (int, error) {
	w.body = append(w.body, s...)
	return len(s), nil
}

func equalFoldString(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

var (
	connCloseLine = []byte("Connection: close\r\n")
	connKeepLine  = []byte("Connection: keep-alive\r\n")
	helloTailB    = []byte(helloTail)
	allowGetHead  = []byte("GET, HEAD")
)

// serve routes the parsed request and queues its response.
func (c *Conn) serve() {
	h := &c.h
	base := c.in[c.r:]
	method := base[:h.methodLen:h.methodLen]
	target := base[h.targetOff : h.targetOff+h.targetLen : h.targetOff+h.targetLen]
	if len(target) == 1 && target[0] == '*' && string(method) == "OPTIONS" {
		c.respondText(200, false, nil, nil) // the server's options (RFC 9110 9.3.7)
		return
	}
	rawPath, query, ok := splitTarget(target)
	if !ok {
		c.fail(400)
		return
	}
	path := rawPath[:len(rawPath):len(rawPath)]
	if needsClean(rawPath) {
		path, ok = cleanPath(c.path, rawPath)
		c.path = path[:0]
		if !ok {
			c.fail(400)
			return
		}
	}
	r := &c.req
	r.Method, r.Target, r.Path, r.Query = method, target, path, query
	r.Remote = c.remote
	r.fields = base[h.lineEnd : h.end-2 : h.end-2]
	r.Proto = "HTTP/1.1"
	if h.version == 10 {
		r.Proto = "HTTP/1.0"
	}
	isHead := string(method) == "HEAD"
	getOrHead := isHead || string(method) == "GET"

	if ep := c.srv.site.lookup(path); ep != nil {
		h := ep.handler(method)
		if h == nil {
			c.respondText(405, isHead, ep.allow, nil)
			return
		}
		c.serveHandler(h, isHead)
		return
	}
	if c.srv.cache != nil {
		c.serveStatic(path, query, isHead, getOrHead)
		return
	}
	c.serveBuiltin(path, isHead, getOrHead)
}

// serveBuiltin answers a path nothing else serves: the built-in hello at "/",
// else 404.
func (c *Conn) serveBuiltin(path []byte, isHead, getOrHead bool) {
	switch {
	case len(path) != 1 || path[0] != '/':
		c.respondText(404, isHead, nil, nil)
	case !getOrHead:
		c.respondText(405, isHead, nil, nil)
	default:
		c.serveHello(isHead)
	}
}

var dotSegment = []byte("/.")

// serveStatic serves path from the docroot: from the shard's cache, or, on a
// miss, once a file job has resolved it (c waits; resume calls serve again
// with ready set). Dotfiles and dot-directories are never looked up.
func (c *Conn) serveStatic(path, query []byte, isHead, getOrHead bool) {
	e := c.ready
	c.ready = nil
	if e == nil {
		if e = c.srv.cache.get(path); e == nil {
			if bytes.Contains(path, dotSegment) { // never loaded, so never a hit
				c.serveBuiltin(path, isHead, getOrHead)
				return
			}
			if e = c.srv.load(c, path, false); e == nil {
				c.answerShed(isHead)
				return // waiting, or shed
			}
		}
	}
	switch {
	case e.kind == entMissing:
		c.serveBuiltin(path, isHead, getOrHead)
	case !getOrHead:
		c.respondText(405, isHead, nil, nil)
	case e.kind == entRedirect:
		c.respondText(301, isHead, path, query)
	default:
		c.serveFile(e.file, isHead)
	}
}

// connLine is the Connection field this response needs, if any.
func (c *Conn) connLine() []byte {
	if !c.h.keepAlive {
		return connCloseLine
	}
	if c.h.version == 10 {
		return connKeepLine
	}
	return nil
}

// finish counts and logs a queued response and closes after it if needed.
func (c *Conn) finish(status, bodyLen int) {
	s := c.srv
	s.stats.Requests++
	if i := status / 100; i < len(s.stats.Responses) {
		s.stats.Responses[i]++
	}
	if s.log != nil {
		s.logRequest(c, status, bodyLen)
	}
	if !c.h.keepAlive {
		c.closing = true
	}
}

func (c *Conn) serveHello(isHead bool) {
	d := c.srv.date
	cl := c.connLine()
	bodyLen := 5
	if isHead {
		bodyLen = 0
	}
	if cl == nil {
		c.push(d.hello[:len(d.hello)-5+bodyLen], -1)
	} else {
		c.push(d.ok, -1)
		c.push(cl, -1)
		c.push(helloTailB[:len(helloTailB)-5+bodyLen], -1)
	}
	c.finish(200, bodyLen)
}

func (c *Conn) serveFile(f *staticFile, isHead bool) {
	d := c.srv.date
	h := &c.h
	in := c.in[c.r:]
	if (h.im.ok() || h.ius.ok()) && f.preconditionFailed(h, in) {
		c.respondText(412, isHead, nil, nil)
		return
	}
	if f.notModified(in[h.inmOff:h.inmOff+h.inmLen], in[h.imsOff:h.imsOff+h.imsLen], h.hasINM, h.hasIMS) {
		c.push(d.nm, -1)
		c.push(c.connLine(), -1)
		c.push(f.nm, -1)
		c.finish(304, 0)
		return
	}
	if h.rng.ok() && !isHead && c.serveRange(f) {
		return
	}
	c.push(d.ok, -1)
	c.push(c.connLine(), -1)
	if isHead {
		c.push(f.full[:f.headLen], -1)
		c.finish(200, 0)
		return
	}
	if f.streamed {
		c.push(f.full[:f.headLen], -1)
		c.startStream(f, 0, f.size)
		c.finish(200, int(f.size))
		return
	}
	c.push(f.full, -1)
	c.finish(200, int(f.size))
}

// serveHandler runs a dynamic handler and copies its response into the arena.
func (c *Conn) serveHandler(hf Handler, isHead bool) {
	w := &c.rw
	for again := true; again; {
		w.status = 200
		w.hdr = w.hdr[:0]
		w.body = w.body[:0]
		if !c.callHandler(hf) {
			c.again = false
			c.srv.stats.Panics++
			c.h.keepAlive = false // the handler's state is suspect: end the connection
			c.respondText(500, false, nil, nil)
			return
		}
		again, c.again = c.again, false // Offload ran inline
	}
	if c.answerShed(isHead) {
		return
	}
	if c.wait != nil {
		return // the handler waits for a file (File) or a job (Offload): it runs again then
	}
	status := w.status
	noBody := status == 204 || status == 304
	b, start := c.beginArena()
	b = appendStatusLine(b, status)
	b = append(b, serverLine...)
	b = append(b, c.srv.date.date...)
	b = append(b, w.hdr...)
	if !noBody {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, c.connLine()...)
	b = append(b, "\r\n"...)
	sent := 0
	if !noBody && !isHead {
		b = append(b, w.body...)
		sent = len(w.body)
	}
	c.endArena(b, start)
	c.finish(status, sent)
}

// answerShed answers 503 when the request needed a file job that the full
// FileIO did not take (what a handler wrote is discarded); the connection
// stays open.
func (c *Conn) answerShed(isHead bool) bool {
	if !c.shedIO {
		return false
	}
	c.shedIO = false
	c.respondText(503, isHead, nil, nil)
	return true
}

// callHandler runs h, turning a panic into a 500 rather than a dead shard.
func (c *Conn) callHandler(h Handler) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	h(&c.rw, &c.req)
	return true
}

// respondText queues a short text/plain response built in the arena: errors,
// 404, 405 (with Allow: extra, or GET, HEAD when extra is nil), 301 (with
// Location extra + "/" + "?" query, extra being a clean decoded path) and 200
// for "OPTIONS *" (with Allow, no body).
func (c *Conn) respondText(status int, isHead bool, extra, query []byte) {
	reason := statusText(status)
	bodyLen := 3 + 1 + len(reason) + 1
	if status == 200 {
		isHead, bodyLen = true, 0
	}
	b, start := c.beginArena()
	b = appendStatusLine(b, status)
	b = append(b, serverLine...)
	b = append(b, c.srv.date.date...)
	b = append(b, "Content-Type: text/plain; charset=utf-8\r\n"...)
	switch status {
	case 200, 405:
		if extra == nil {
			extra = allowGetHead
		}
		b = append(b, "Allow: "...)
		b = append(b, extra...)
		b = append(b, "\r\n"...)
	case 301:
		// The clean path, re-encoded: a raw "//host" must not become a
		// protocol-relative Location (an open redirect).
		b = append(b, "Location: "...)
		b = appendPathEscaped(b, extra)
		b = append(b, '/')
		if query != nil {
			b = append(b, '?')
			b = append(b, query...)
		}
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(bodyLen), 10)
	b = append(b, "\r\n"...)
	b = append(b, c.connLine()...)
	b = append(b, "\r\n"...)
	if isHead {
		bodyLen = 0
	} else {
		b = strconv.AppendInt(b, int64(status), 10)
		b = append(b, ' ')
		b = append(b, reason...)
		b = append(b, '\n')
	}
	c.endArena(b, start)
	c.finish(status, bodyLen)
}

// fail answers malformed or oversized input and closes the connection.
func (c *Conn) fail(status int) {
	c.h.keepAlive = false
	c.srv.stats.BadInput++
	c.respondText(status, false, nil, nil)
	c.closing = true
}

func appendStatusLine(b []byte, status int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, statusText(status)...)
	return append(b, "\r\n"...)
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 202:
		return "Accepted"
	case 204:
		return "No Content"
	case 206:
		return "Partial Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 303:
		return "See Other"
	case 304:
		return "Not Modified"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 409:
		return "Conflict"
	case 411:
		return "Length Required"
	case 412:
		return "Precondition Failed"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 415:
		return "Unsupported Media Type"
	case 416:
		return "Range Not Satisfiable"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status"
}

// appendPathEscaped percent-encodes a decoded path for a Location field,
// keeping RFC 3986 pchar and "/" as they are.
func appendPathEscaped(b, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, ch := range p {
		if pathSafe[ch] {
			b = append(b, ch)
			continue
		}
		b = append(b, '%', hex[ch>>4], hex[ch&15])
	}
	return b
}

var pathSafe = func() (t [256]bool) {
	for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/" {
		t[c] = true
	}
	return t
}()
