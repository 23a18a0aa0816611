package httpd

import (
	"bytes"
	"strconv"
)

// Preconditions and byte ranges of static files (RFC 9110 13 and 14).
//
//   - If-Match (strong comparison) or, without it, If-Unmodified-Since that
//     fails: 412, before If-None-Match and If-Modified-Since (13.2.2).
//   - One byte range of a GET ("bytes=0-99", "bytes=100-", "bytes=-100"):
//     206 with Content-Range. A range past the end, or one that does not
//     parse: 416 with "Content-Range: bytes */size", as net/http answers.
//   - Several ranges: 200 with the whole file (a server may ignore Range,
//     14.2; multipart/byteranges is not made). Another unit than bytes: 200.
//   - If-Range: the range applies only if its entity-tag matches strongly or
//     its date equals Last-Modified; otherwise 200 with the whole file.

// preconditionFailed applies If-Match and If-Unmodified-Since.
func (f *staticFile) preconditionFailed(h *head, in []byte) bool {
	if h.im.ok() {
		return !etagMatch(h.im.value(in), f.etag, true)
	}
	if h.ius.ok() {
		t, ok := parseHTTPDate(h.ius.value(in))
		return ok && f.mtime > t
	}
	return false
}

// ifRange reports whether an If-Range field lets the range apply.
func (f *staticFile) ifRange(h *head, in []byte) bool {
	if !h.ir.ok() {
		return true
	}
	v := h.ir.value(in)
	if len(v) > 0 && v[0] == '"' {
		return bytes.Equal(v, f.etag)
	}
	t, ok := parseHTTPDate(v)
	return ok && t == f.mtime
}

type rangeResult uint8

const (
	rangeWhole rangeResult = iota // ignore the field: 200
	rangePart                     // 206 of [start, end)
	rangeNone                     // 416
)

// parseRange reads a Range field's value against a file of size bytes.
func parseRange(v []byte, size int64) (start, end int64, r rangeResult) {
	const unit = "bytes="
	if len(v) < len(unit) || !equalFold(v[:len(unit)], unit) {
		return 0, 0, rangeWhole
	}
	spec := trimOWS(v[len(unit):])
	if bytes.IndexByte(spec, ',') >= 0 {
		return 0, 0, rangeWhole
	}
	dash := bytes.IndexByte(spec, '-')
	if dash < 0 {
		return 0, 0, rangeNone
	}
	first, last := trimOWS(spec[:dash]), trimOWS(spec[dash+1:])
	if len(first) == 0 { // suffix: the last n bytes
		n, ok := parseDigits(last)
		if !ok || n == 0 || size == 0 {
			return 0, 0, rangeNone
		}
		return max(size-n, 0), size, rangePart
	}
	a, ok := parseDigits(first)
	if !ok || a >= size {
		return 0, 0, rangeNone
	}
	if len(last) == 0 {
		return a, size, rangePart
	}
	b, ok := parseDigits(last)
	if !ok || b < a {
		return 0, 0, rangeNone
	}
	return a, min(b+1, size), rangePart
}

// parseDigits parses a non-negative decimal of at most 18 digits.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// serveRange answers a GET with a Range field: 206 or 416, and reports false
// when the whole file is to be sent instead.
func (c *Conn) serveRange(f *staticFile) bool {
	in := c.in[c.r:]
	h := &c.h
	start, end, res := parseRange(h.rng.value(in), f.size)
	if res == rangeWhole || !f.ifRange(h, in) {
		return false
	}
	b, at := c.beginArena()
	if res == rangeNone {
		const body = "416 Range Not Satisfiable\n"
		b = appendStatusLine(b, 416)
		b = append(b, serverLine...)
		b = append(b, c.srv.date.date...)
		b = append(b, c.connLine()...)
		b = append(b, "Content-Type: text/plain; charset=utf-8\r\nContent-Range: bytes */"...)
		b = strconv.AppendInt(b, f.size, 10)
		b = append(b, "\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n\r\n"+body...)
		c.endArena(b, at)
		c.finish(416, len(body))
		return true
	}
	b = appendStatusLine(b, 206)
	b = append(b, serverLine...)
	b = append(b, c.srv.date.date...)
	b = append(b, c.connLine()...)
	b = append(b, f.ctype...)
	b = append(b, "Content-Range: bytes "...)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, end-1, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, f.size, 10)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, end-start, 10)
	b = append(b, "\r\n"...)
	b = append(b, f.valid...)
	b = append(b, "\r\n"...)
	c.endArena(b, at)
	if f.streamed {
		c.startStream(f, start, end)
	} else {
		c.push(f.full[int64(f.headLen)+start:int64(f.headLen)+end], -1)
	}
	c.finish(206, int(end-start))
	return true
}
