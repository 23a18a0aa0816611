package httpd

import (
	"bytes"
	"net/netip"
)

// Request is a parsed request. Its slices point into the connection's input
// buffer (Path into a per-connection scratch buffer) and are valid only until
// the handler returns.
type Request struct {
	Method, Target, Path, Query []byte
	Body                        []byte // decoded (chunked bodies are de-chunked)
	Proto                       string // "HTTP/1.1" or "HTTP/1.0"
	Remote                      netip.AddrPort
	fields                      []byte // the field lines, each ending in CRLF
}

// Header returns the value of the first field named name (case-insensitive,
// name in lower case), with surrounding whitespace removed, or nil.
func (r *Request) Header(name string) []byte {
	f := r.fields
	for len(f) > 0 {
		i := bytes.IndexByte(f, '\n')
		if i < 0 {
			return nil
		}
		line := f[:i-1]
		f = f[i+1:]
		colon := bytes.IndexByte(line, ':')
		if colon > 0 && equalFold(line[:colon], name) {
			return trimOWS(line[colon+1:])
		}
	}
	return nil
}
