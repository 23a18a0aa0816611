package httpd

import "bytes"

// head is the parser's state for the request at Conn.r (RFC 9112). Offsets are
// relative to Conn.r, so compacting the input buffer does not disturb them.
type head struct {
	scan      int // the next byte to look at for a line end
	lineStart int // start of the line being scanned
	lineEnd   int // end of the request line incl. CRLF; 0 until seen
	end       int // end of the header section incl. the blank line
	consumed  int // bytes of the whole request, body included, once done

	methodLen     int
	targetOff     int
	targetLen     int
	version       uint8 // 10 or 11
	keepAlive     bool
	connClose     bool
	connKeep      bool
	hosts         int
	expect        bool // Expect: 100-continue
	continued     bool // 100 Continue sent
	chunked       bool
	teSeen        bool
	inmOff        int // If-None-Match value, when hasINM
	inmLen        int
	imsOff        int // If-Modified-Since value, when hasIMS
	imsLen        int
	hasINM        bool
	hasIMS        bool
	rng, im, ius  span  // Range, If-Match, If-Unmodified-Since
	ir            span  // If-Range
	contentLength int64 // -1 when absent

	// chunked body decoding, in place: raw bytes at rp are decoded to wp.
	rp, wp   int
	chunkRem int64
	cs       chunkState
	trailer  int // trailer section bytes so far
}

// span is where a field's value lies, relative to r; a field present has
// off > 0 (the request line comes first).
type span struct{ off, n int32 }

func (s span) ok() bool { return s.off > 0 }

// value is the field's value in the request's bytes in.
func (s span) value(in []byte) []byte { return in[s.off : s.off+s.n] }

type chunkState uint8

const (
	chSize    chunkState = iota // chunk-size [chunk-ext] CRLF
	chData                      // chunk-data
	chCRLF                      // CRLF after chunk-data
	chTrailer                   // trailer field lines up to a blank line
)

// parse advances the parser over the buffered bytes of the request at r. It
// reports done when the request (head and body) is complete, or a status for
// malformed or oversized input.
func (c *Conn) parse() (done bool, status int) {
	for {
		switch c.state {
		case stHead:
			done, status := c.parseHead()
			if status != 0 || !done {
				return false, status
			}
			if status := c.startBody(); status != 0 {
				return false, status
			}
			if c.state == stHead {
				c.h.consumed = c.h.end
				return true, 0
			}
		case stBody:
			need := c.h.end + int(c.h.contentLength)
			if c.w-c.r < need {
				c.maybeContinue()
				return false, 0
			}
			c.h.consumed = need
			c.req.Body = c.in[c.r+c.h.end : c.r+need : c.r+need]
			return true, 0
		case stChunk:
			done, status := c.parseChunked()
			if status != 0 {
				return false, status
			}
			if !done {
				c.maybeContinue()
				return false, 0
			}
			c.h.consumed = c.h.rp
			c.req.Body = c.in[c.r+c.h.end : c.r+c.h.wp : c.r+c.h.wp]
			return true, 0
		}
	}
}

// parseHead finds and checks the lines of the head as they arrive. Each line is
// checked once it is complete, so errors are answered early, and the scan
// resumes where it stopped, so input arriving a byte at a time costs O(n).
func (c *Conn) parseHead() (done bool, status int) {
	h := &c.h
	buf := c.in[c.r:c.w]
	for {
		i := bytes.IndexByte(buf[h.scan:], '\n')
		if i < 0 {
			h.scan = len(buf)
			if h.lineEnd == 0 {
				if len(buf) > maxRequestLine {
					return false, 414
				}
			} else if len(buf)-h.lineEnd > MaxHeaderBytes+2 {
				return false, 431
			}
			return false, 0
		}
		nl := h.scan + i
		h.scan = nl + 1
		if nl == h.lineStart || buf[nl-1] != '\r' {
			return false, 400 // bare LF
		}
		start := h.lineStart
		line := buf[start : nl-1]
		h.lineStart = nl + 1
		if h.lineEnd == 0 {
			if len(line) == 0 {
				// RFC 9112 2.2: ignore empty lines before the request line.
				c.r += nl + 1
				buf = c.in[c.r:c.w]
				h.scan, h.lineStart = 0, 0
				continue
			}
			h.lineEnd = nl + 1
			if len(line) > maxRequestLine {
				return false, 414
			}
			if status := c.parseRequestLine(line); status != 0 {
				return false, status
			}
			continue
		}
		if nl+1-h.lineEnd > MaxHeaderBytes+2 {
			return false, 431
		}
		if len(line) == 0 {
			h.end = nl + 1
			return true, c.endHead()
		}
		if status := c.parseField(line, start); status != 0 {
			return false, status
		}
	}
}

// parseRequestLine checks method SP request-target SP HTTP-version (RFC 9112 3).
func (c *Conn) parseRequestLine(line []byte) int {
	h := &c.h
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || sp > maxMethod {
		return 400
	}
	for _, b := range line[:sp] {
		if !isToken(b) {
			return 400
		}
	}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return 400 // no target, or HTTP/0.9
	}
	target := rest[:sp2]
	if len(target) > MaxTarget {
		return 414
	}
	for _, b := range target {
		if b <= ' ' || b >= 0x7f {
			return 400
		}
	}
	v := rest[sp2+1:]
	if len(v) != 8 || string(v[:5]) != "HTTP/" || !isDigit(v[5]) || v[6] != '.' || !isDigit(v[7]) {
		return 400
	}
	switch {
	case v[5] == '1' && v[7] == '1':
		h.version = 11
	case v[5] == '1' && v[7] == '0':
		h.version = 10
	default:
		return 505 // HTTP/2 preface ("PRI * HTTP/2.0") and other versions
	}
	h.methodLen = sp
	h.targetOff = sp + 1
	h.targetLen = len(target)
	return 0
}

// parseField checks one field line (RFC 9112 5) and records the fields that
// decide framing, persistence and conditional responses. off is the line's
// offset from r.
func (c *Conn) parseField(line []byte, off int) int {
	h := &c.h
	if line[0] == ' ' || line[0] == '\t' {
		return 400 // obs-fold
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return 400
	}
	name := line[:colon]
	for _, b := range name {
		if !isToken(b) {
			return 400 // includes whitespace before the colon
		}
	}
	raw := line[colon+1:]
	for _, b := range raw {
		if b < ' ' && b != '\t' || b == 0x7f {
			return 400 // bare CR, NUL and other controls
		}
	}
	vs, ve := trimOWSIndex(raw)
	value := raw[vs:ve]
	voff := off + colon + 1 + vs
	switch len(name) {
	case 5:
		if equalFold(name, "range") {
			h.rng = span{int32(voff), int32(len(value))}
		}
	case 8:
		if equalFold(name, "if-match") {
			h.im = span{int32(voff), int32(len(value))}
		} else if equalFold(name, "if-range") {
			h.ir = span{int32(voff), int32(len(value))}
		}
	case 19:
		if equalFold(name, "if-unmodified-since") {
			h.ius = span{int32(voff), int32(len(value))}
		}
	case 4:
		if equalFold(name, "host") {
			h.hosts++
			if h.hosts > 1 || !validHost(value) {
				return 400 // RFC 9112 3.2
			}
		}
	case 6:
		if equalFold(name, "expect") && equalFold(value, "100-continue") {
			h.expect = true
		}
	case 10:
		if equalFold(name, "connection") {
			forEachToken(value, func(t []byte) {
				if equalFold(t, "close") {
					h.connClose = true
				} else if equalFold(t, "keep-alive") {
					h.connKeep = true
				}
			})
		}
	case 13:
		if equalFold(name, "if-none-match") {
			h.hasINM, h.inmOff, h.inmLen = true, voff, len(value)
		}
	case 14:
		if equalFold(name, "content-length") {
			n, ok := parseContentLength(value)
			if !ok || h.teSeen || (h.contentLength >= 0 && h.contentLength != n) {
				return 400 // no request smuggling (RFC 9112 6.3)
			}
			h.contentLength = n
		}
	case 17:
		if equalFold(name, "transfer-encoding") {
			if h.version == 10 || h.contentLength >= 0 || h.teSeen {
				return 400
			}
			h.teSeen = true
			if !equalFold(value, "chunked") {
				return 501
			}
			h.chunked = true
		} else if equalFold(name, "if-modified-since") {
			h.hasIMS, h.imsOff, h.imsLen = true, voff, len(value)
		}
	}
	return 0
}

// endHead applies the whole-head rules once the blank line has arrived.
func (c *Conn) endHead() int {
	h := &c.h
	if h.version == 11 && h.hosts == 0 {
		return 400 // RFC 9112 3.2
	}
	h.keepAlive = !h.connClose && (h.version == 11 || h.connKeep)
	return 0
}

// startBody picks the body framing (RFC 9112 6.3).
func (c *Conn) startBody() int {
	h := &c.h
	switch {
	case h.chunked:
		c.state = stChunk
		h.rp, h.wp = h.end, h.end
	case h.contentLength > c.srv.site.cfg.MaxBody:
		return 413
	case h.contentLength > 0:
		c.state = stBody
	}
	c.bodyStart = c.now
	return 0
}

// parseChunked decodes the chunked body in place: chunk data is moved down to
// follow the head, so Request.Body is one contiguous slice.
func (c *Conn) parseChunked() (done bool, status int) {
	h := &c.h
	buf := c.in[c.r:c.w]
	defer func() {
		// Move the undecoded rest down to wp so the buffer never fills with
		// chunk framing.
		if h.rp > h.wp && !done {
			n := copy(c.in[c.r+h.wp:], c.in[c.r+h.rp:c.w])
			c.w = c.r + h.wp + n
			h.rp = h.wp
		}
	}()
	for {
		switch h.cs {
		case chSize:
			i := bytes.IndexByte(buf[h.rp:], '\n')
			if i < 0 {
				if len(buf)-h.rp > maxChunkLine {
					return false, 400
				}
				return false, 0
			}
			if i == 0 || buf[h.rp+i-1] != '\r' || i-1 > maxChunkLine {
				return false, 400
			}
			n, ok := parseChunkLine(buf[h.rp : h.rp+i-1])
			if !ok {
				return false, 400
			}
			h.rp += i + 1
			if n == 0 {
				h.cs = chTrailer
				continue
			}
			if int64(h.wp-h.end)+n > c.srv.site.cfg.MaxBody {
				return false, 413
			}
			h.chunkRem = n
			h.cs = chData
		case chData:
			n := min(h.chunkRem, int64(len(buf)-h.rp))
			if n == 0 {
				return false, 0
			}
			copy(buf[h.wp:], buf[h.rp:h.rp+int(n)])
			h.wp += int(n)
			h.rp += int(n)
			h.chunkRem -= n
			if h.chunkRem == 0 {
				h.cs = chCRLF
			}
		case chCRLF:
			if len(buf)-h.rp < 2 {
				return false, 0
			}
			if buf[h.rp] != '\r' || buf[h.rp+1] != '\n' {
				return false, 400
			}
			h.rp += 2
			h.cs = chSize
		case chTrailer:
			i := bytes.IndexByte(buf[h.rp:], '\n')
			if i < 0 {
				if h.trailer+len(buf)-h.rp > MaxHeaderBytes {
					return false, 431
				}
				return false, 0
			}
			if i == 0 || buf[h.rp+i-1] != '\r' {
				return false, 400
			}
			line := buf[h.rp : h.rp+i-1]
			h.rp += i + 1
			h.trailer += i + 1
			if h.trailer > MaxHeaderBytes {
				return false, 431
			}
			if len(line) == 0 {
				return true, 0
			}
			if status := checkTrailer(line); status != 0 {
				return false, status
			}
		}
	}
}

// parseChunkLine parses chunk-size [chunk-ext] (RFC 9112 7.1.1). Extensions are
// checked for stray bytes and otherwise ignored.
func parseChunkLine(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d := unhex(line[i])
		if d < 0 {
			break
		}
		if n > (1<<40)>>4 {
			return 0, false // absurd size: larger than any MaxBody
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, false
	}
	ext := line[i:]
	j := 0
	for j < len(ext) && (ext[j] == ' ' || ext[j] == '\t') {
		j++
	}
	if j == len(ext) {
		return n, j == 0 // BWS is only allowed before ";"
	}
	if ext[j] != ';' {
		return 0, false
	}
	for _, b := range ext[j:] {
		if b < ' ' && b != '\t' || b == 0x7f {
			return 0, false
		}
	}
	return n, true
}

// checkTrailer applies the field-line rules to a trailer line; trailer fields
// are otherwise discarded.
func checkTrailer(line []byte) int {
	if line[0] == ' ' || line[0] == '\t' {
		return 400
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return 400
	}
	for _, b := range line[:colon] {
		if !isToken(b) {
			return 400
		}
	}
	for _, b := range line[colon+1:] {
		if b < ' ' && b != '\t' || b == 0x7f {
			return 400
		}
	}
	return 0
}

// maybeContinue sends "100 Continue" once to a client waiting for it before it
// sends the body (RFC 9110 10.1.1).
func (c *Conn) maybeContinue() {
	if c.h.expect && !c.h.continued && c.h.version == 11 {
		c.h.continued = true
		c.push(continueResp, -1)
	}
}

var continueResp = []byte("HTTP/1.1 100 Continue\r\n\r\n")

func parseContentLength(v []byte) (int64, bool) {
	n := int64(-1)
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		item = trimOWS(item)
		if len(item) == 0 || len(item) > 18 {
			return 0, false
		}
		var x int64
		for _, b := range item {
			if !isDigit(b) {
				return 0, false
			}
			x = x*10 + int64(b-'0')
		}
		if n >= 0 && x != n {
			return 0, false
		}
		n = x
	}
	return n, n >= 0
}

func forEachToken(v []byte, f func([]byte)) {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		f(trimOWS(item))
	}
}

// tokenTable marks tchar (RFC 9110 5.6.2).
var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isToken(b byte) bool { return tokenTable[b] }
func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func unhex(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'a' && b <= 'f':
		return int(b - 'a' + 10)
	case b >= 'A' && b <= 'F':
		return int(b - 'A' + 10)
	}
	return -1
}

func trimOWSIndex(v []byte) (int, int) {
	s, e := 0, len(v)
	for s < e && (v[s] == ' ' || v[s] == '\t') {
		s++
	}
	for e > s && (v[e-1] == ' ' || v[e-1] == '\t') {
		e--
	}
	return s, e
}

func trimOWS(v []byte) []byte {
	s, e := trimOWSIndex(v)
	return v[s:e]
}

// equalFold compares ASCII case-insensitively; lower must be lower case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// validHost checks a Host value against uri-host [ ":" port ] loosely: the
// characters of reg-name, IP literals and a port. Empty is allowed.
func validHost(v []byte) bool {
	for _, b := range v {
		if !hostTable[b] {
			return false
		}
	}
	return true
}

var hostTable = func() (t [256]bool) {
	for _, c := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]%" {
		t[c] = true
	}
	return t
}()
