package wreck

import "bytes"

// Limits on what a response may send before it is counted as malformed.
const (
	defaultMaxHead = 16 << 10 // status line + headers, including the blank line
	maxChunkLine   = 1 << 10  // chunk-size line with extensions
)

// pstate is where the parser is inside the current response.
type pstate uint8

const (
	psHead       pstate = iota // waiting for a complete status line and header section
	psBody                     // Content-Length body, rem bytes to go
	psChunkSize                // waiting for a complete chunk-size line
	psChunkData                // chunk data, rem bytes to go
	psChunkEnd                 // the CRLF after chunk data
	psTrailer                  // trailer lines after the last chunk, up to a blank line
	psUntilClose               // no framing: the body runs until the server closes
)

// pres is what one call of feed found.
type pres uint8

const (
	pMore      pres = iota // everything usable consumed; keep the unconsumed tail and read more
	pDone                  // one response is complete
	pMalformed             // the bytes are not an HTTP/1.1 response
	pOversized             // the header section (or trailers) exceeds the limit
)

// parser is an incremental HTTP/1.1 response parser for one connection. Header
// sections and chunk-size lines are parsed only when complete in the buffer
// given to feed (the caller carries a partial one over to the next read);
// body bytes are counted and skipped wherever they fall. It never allocates.
//
// Owned by one conn; the fields describing the last response (status, close,
// seq, hasSeq) are valid from pDone until the next feed.
type parser struct {
	maxHead int
	st      pstate
	rem     int64 // body or chunk bytes still to skip
	trailer int   // trailer bytes seen so far

	status int    // status code of the current response
	close  bool   // the server closes the connection after this response
	hasSeq bool   // the response carried X-Wreck-Seq
	seq    uint64 // its value

	check *bodyCheck // the SPECweb99 workload's: sees Set-Cookie and every body byte (nil: skip them)
}

// reset prepares p for a new connection.
func (p *parser) reset() {
	p.st, p.rem, p.trailer = psHead, 0, 0
	p.status, p.close, p.hasSeq, p.seq = 0, false, false, 0
}

// midResponse reports whether an EOF now would cut a response short, given
// that carried holds bytes of an incomplete header section.
func (p *parser) midResponse(carried int) bool {
	return p.st != psHead && p.st != psUntilClose || carried > 0
}

var crlf = []byte("\r\n")

// feed parses b, which starts where the last call stopped (after any carried
// bytes were put back in front). It returns how many bytes it consumed and why
// it stopped. After pMore the caller must keep b[n:] and present it again.
func (p *parser) feed(b []byte) (n int, r pres) {
	for {
		switch p.st {
		case psHead:
			hl := p.head(b[n:])
			switch {
			case hl < 0:
				return n, pMalformed
			case hl == 0 && len(b)-n > p.maxHead, hl > p.maxHead:
				return n, pOversized
			case hl == 0:
				return n, pMore
			}
			n += hl
			switch {
			case p.status < 200: // informational: the real response follows
				p.st = psHead
				continue
			case p.st == psBody && p.rem == 0:
				p.st = psHead
				return n, pDone
			case p.st == psHead: // 204, 304: no body
				return n, pDone
			}
		case psBody, psChunkData:
			k := int64(len(b) - n)
			if k == 0 {
				return n, pMore
			}
			if k > p.rem {
				k = p.rem
			}
			if p.check != nil {
				p.check.write(b[n : n+int(k)])
			}
			n += int(k)
			p.rem -= k
			if p.rem > 0 {
				return n, pMore
			}
			if p.st == psBody {
				p.st = psHead
				return n, pDone
			}
			p.st = psChunkEnd
		case psChunkEnd:
			if len(b)-n < 2 {
				return n, pMore
			}
			if b[n] != '\r' || b[n+1] != '\n' {
				return n, pMalformed
			}
			n += 2
			p.st = psChunkSize
		case psChunkSize:
			i := bytes.Index(b[n:], crlf)
			if i < 0 {
				if len(b)-n > maxChunkLine {
					return n, pMalformed
				}
				return n, pMore
			}
			size, ok := parseChunkSize(b[n : n+i])
			if !ok {
				return n, pMalformed
			}
			n += i + 2
			if size == 0 {
				p.st, p.trailer = psTrailer, 0
			} else {
				p.st, p.rem = psChunkData, size
			}
		case psTrailer:
			i := bytes.Index(b[n:], crlf)
			if i < 0 {
				if p.trailer+len(b)-n > p.maxHead {
					return n, pOversized
				}
				return n, pMore
			}
			n += i + 2
			if i == 0 {
				p.st = psHead
				return n, pDone
			}
			p.trailer += i + 2
			if p.trailer > p.maxHead {
				return n, pOversized
			}
		case psUntilClose:
			return len(b), pMore
		}
	}
}

// head parses the status line and header section at the start of b in one
// pass, line by line, and sets the framing state. It returns the length of
// the head through its blank line, 0 if b holds no complete head yet, or -1
// if it is malformed. Fields change only when it returns a length.
func (p *parser) head(b []byte) int {
	off, status, http10 := statusLine(b)
	if off <= 0 {
		return off
	}
	h := respHead{status: status, http10: http10, cl: -1}
	for {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return 0
		}
		if i == 0 || b[off+i-1] != '\r' {
			return -1 // lines end in CRLF
		}
		line := b[off : off+i-1]
		off += i + 1
		if len(line) == 0 {
			break // the blank line ends the head
		}
		// No obs-fold, no whitespace before the colon (RFC 9112 §5.1, §5.2).
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || line[0] == ' ' || line[0] == '\t' || line[colon-1] == ' ' || line[colon-1] == '\t' {
			return -1
		}
		switch line[0] | 0x20 { // only a few names matter: sort on the first letter
		case 'c', 't', 'x':
			if !h.field(line[:colon], line[colon+1:]) {
				return -1
			}
		case 's':
			if p.check != nil && eqFold(line[:colon], "set-cookie") {
				p.check.setCookie(trimOWS(line[colon+1:]))
			}
		}
	}
	if !p.frame(&h) {
		return -1
	}
	return off
}

// respHead is what head learns from a response head before frame commits
// it to the parser.
type respHead struct {
	status    int
	http10    bool
	cl        int64 // Content-Length, -1 if absent
	chunked   bool  // Transfer-Encoding: chunked
	keepAlive bool  // a keep-alive connection option
	closeTok  bool  // a close connection option
	hasSeq    bool
	seq       uint64 // X-Wreck-Seq
}

// statusLine parses the status line at the start of b. It returns the
// line's length, 0 if b holds no complete line yet, or -1 if it is
// malformed; then the status code and whether the version is HTTP/1.0.
func statusLine(b []byte) (n, status int, http10 bool) {
	// status-line = HTTP-version SP status-code SP [ reason-phrase ] CRLF  (RFC 9112 §4)
	eol := bytes.IndexByte(b, '\n')
	if eol < 0 {
		if len(b) >= 9 && (string(b[:7]) != "HTTP/1." || b[8] != ' ') {
			return -1, 0, false // no need to wait for the rest of a line that is wrong already
		}
		return 0, 0, false
	}
	if eol < 13 || b[eol-1] != '\r' || string(b[:7]) != "HTTP/1." || (b[7] != '0' && b[7] != '1') || b[8] != ' ' {
		return -1, 0, false
	}
	for _, c := range b[9:12] {
		if c < '0' || c > '9' {
			return -1, 0, false
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 || (b[12] != ' ' && b[12] != '\r') {
		return -1, 0, false
	}
	return eol + 1, status, b[7] == '0'
}

// field takes in one header field; head passes only those whose names
// start with c, t or x, the initials of the names we read, and val
// untrimmed, as most fields need no trimming. It reports false if the
// value is malformed or contradicts an earlier field.
func (h *respHead) field(name, val []byte) bool {
	switch {
	case eqFold(name, "content-length"):
		v, ok := parseDecimal(trimOWS(val))
		if !ok || (h.cl >= 0 && v != h.cl) {
			return false
		}
		h.cl = v
	case eqFold(name, "connection"):
		val = trimOWS(val)
		switch {
		case eqFold(val, "keep-alive"):
			h.keepAlive = true
		case eqFold(val, "close"):
			h.closeTok = true
		default:
			h.closeTok = h.closeTok || hasToken(val, "close")
			h.keepAlive = h.keepAlive || hasToken(val, "keep-alive")
		}
	case eqFold(name, "transfer-encoding"):
		// Only "chunked" alone: any other coding cannot be framed by us.
		if !eqFold(trimOWS(val), "chunked") || h.chunked {
			return false
		}
		h.chunked = true
	case eqFold(name, seqHeader):
		v, ok := parseHex(trimOWS(val))
		if !ok {
			return false
		}
		h.seq, h.hasSeq = v, true
	}
	return true
}

// frame sets the parser's framing state and response fields from a complete
// head (RFC 9112 §6.3). It reports false if the response cannot be framed.
func (p *parser) frame(h *respHead) bool {
	closeTok := h.closeTok
	switch {
	case h.status == 101: // we never ask to switch protocols
		return false
	case h.status < 200, h.status == 204, h.status == 304: // no body
		p.st = psHead
	case h.chunked && h.cl >= 0: // RFC 9112 §6.3: a smuggling sign, treat as an error
		return false
	case h.chunked:
		p.st = psChunkSize
	case h.cl >= 0:
		p.st, p.rem = psBody, h.cl
	default:
		p.st, closeTok = psUntilClose, true
	}
	p.status, p.seq, p.hasSeq = h.status, h.seq, h.hasSeq
	p.close = closeTok || (h.http10 && !h.keepAlive)
	return true
}

// eqFold reports whether b equals the lower-case ASCII string s, ignoring case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds token tok (lower case).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		var t []byte
		if i < 0 {
			t, v = v, nil
		} else {
			t, v = v[:i], v[i+1:]
		}
		if eqFold(trimOWS(t), tok) {
			return true
		}
	}
	return false
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseDecimal parses a Content-Length value: 1 to 18 digits, nothing else.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// parseHex parses 1 to 16 hex digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// parseChunkSize parses "hex-size [;ext...]" (RFC 9112 §7.1), at most 15 hex
// digits so the size fits an int64.
func parseChunkSize(line []byte) (int64, bool) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = trimOWS(line)
	if len(line) == 0 || len(line) > 15 {
		return 0, false
	}
	var v int64
	for _, c := range line {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | int64(d)
	}
	return v, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
