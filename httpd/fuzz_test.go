package httpd

import (
	"bytes"
	"io"
	"strconv"
	"testing"
)

// fuzzSetup is testSetup without the panicking route (a recovered panic
// allocates, which the fuzz target would report).
func fuzzSetup(s *Site) {
	s.Handle("/echo", func(w *ResponseWriter, r *Request) {
		w.Header("Content-Type", "application/octet-stream")
		w.Write(r.Body)
	})
	s.Handle("/api/", func(w *ResponseWriter, r *Request) {
		w.WriteString("api:")
		w.Write(r.Path)
		w.Write(r.Header("host"))
	})
}

// FuzzParser feeds arbitrary input in pieces of a fuzzed size and checks that
// the responder never panics, answers with whole HTTP/1.1 responses no more
// often and no larger than the input allows, closes after bad input, and —
// run a second time on the pooled connection — allocates nothing.
//
// Only the first fuzzInputMax bytes are read.
func FuzzParser(f *testing.F) {
	for _, tc := range parserCases {
		f.Add([]byte(tc.in), uint16(0))
		f.Add([]byte(tc.in), uint16(7))
	}
	const maxBody = 100 // small, for the body limits to lie within reach
	site, err := NewSite(Config{Docroot: makeDocroot(f), MaxBody: maxBody})
	if err != nil {
		f.Fatal(err)
	}
	fuzzSetup(site)
	var out bytes.Buffer
	out.Grow(1 << 20)

	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		data = data[:min(len(data), fuzzInputMax)]
		// A new server each time: what the input covers must not depend
		// on what ran before (pooled buffers, cached files), or the
		// fuzzer minimizes inputs whose new coverage it cannot reproduce.
		srv := NewServer(site, io.Discard)
		srv.Tick(t0)
		piece := int(split%512) + 1
		lines := uint64(bytes.Count(data, []byte("\n")))
		// run serves data once and checks the output; it allocates nothing
		// unless it fails.
		run := func() {
			st0 := srv.Stats()
			out.Reset()
			continues := 0
			c := srv.NewConn(testRemote, t0)
			rest := data
			for stalls := 0; len(rest) > 0 && !c.Closing(); {
				k := min(piece, len(rest))
				n := c.Feed(rest[:k], t0)
				rest = rest[n:]
				drained := drainInto(c, &out, &continues)
				if n == 0 && !drained {
					if stalls++; stalls > 2 {
						t.Fatalf("Feed stalled with %d bytes left", len(rest))
					}
				}
			}
			c.PeerClosed(t0)
			drainInto(c, &out, &continues)
			if !c.Closing() {
				t.Fatal("not closing after PeerClosed with output drained")
			}
			srv.Release(c)
			srv.Tick(t0)

			reqs := srv.Stats().Requests - st0.Requests
			if reqs > lines/2+1 {
				t.Fatalf("%d responses from %d lines of input", reqs, lines)
			}
			maxResp := uint64(MaxTarget + maxBody + 1024)
			if uint64(out.Len()) > reqs*maxResp+uint64(continues)*uint64(len(continueResp)) {
				t.Fatalf("%d output bytes for %d responses", out.Len(), reqs)
			}
			if reqs > 0 && !bytes.HasPrefix(out.Bytes(), []byte("HTTP/1.1 ")) {
				t.Fatalf("output does not start with a status line: %q", out.Bytes()[:min(out.Len(), 40)])
			}
			if got := bytes.Count(out.Bytes(), []byte("\r\nContent-Length: ")); got < int(reqs)-int(bytes.Count(out.Bytes(), []byte(" 204 No Content\r\n"))) {
				t.Fatalf("%d responses but %d Content-Length fields", reqs, got)
			}
		}
		// AllocsPerRun runs it once to warm up (the connection, its
		// buffers, the files it asks for), then once measured, on the
		// pooled connection: the steady state. One measured run, as
		// AllocsPerRun reports the mean rounded down.
		if n := testing.AllocsPerRun(1, run); n != 0 {
			t.Fatalf("%v allocations in steady state", n)
		}
	})
}

// fuzzInputMax bounds the input of the fuzz targets that serve a stream: a
// few requests, or one with a body over FuzzParser's MaxBody; not the 4-8 KB
// line and header limits, which the parser table covers. The fuzzer
// minimizes each new input before it fuzzes on, and hands out no other work
// meanwhile; that takes a number of runs quadratic in the length when few
// bytes can go (each byte counts in some loop), up to its 60 s limit: with
// inputs of 2-17 KB FuzzParser sat at 0 execs/s for most of a 3-minute run,
// and still for 20-40 s at a time with 512 bytes.
const fuzzInputMax = 384

// drainInto appends and advances all pending output, counting 100 Continue
// responses; it reports whether there was any.
func drainInto(c *Conn, out *bytes.Buffer, continues *int) bool {
	any := false
	for len(c.Output()) > 0 {
		any = true
		n := 0
		for _, s := range c.Output() {
			if bytes.Equal(s, continueResp) {
				*continues++
			}
			out.Write(s)
			n += len(s)
		}
		c.Advance(n)
	}
	return any
}

// FuzzRange: a parsed byte range always lies within the file, and written
// back in canonical form it parses to itself.
func FuzzRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=100-", "bytes=5-2", "bytes=0-1,3-4", "items=1-2", "bytes= 7 - 8 ", "bytes=-0"} {
		f.Add(s, int64(307200))
	}
	f.Fuzz(func(t *testing.T, v string, size int64) {
		size &= 1<<40 - 1
		start, end, r := parseRange([]byte(v), size)
		if r != rangePart {
			return
		}
		if start < 0 || start >= end || end > size {
			t.Fatalf("%q of %d: [%d, %d)", v, size, start, end)
		}
		canon := "bytes=" + strconv.FormatInt(start, 10) + "-" + strconv.FormatInt(end-1, 10)
		if s2, e2, r2 := parseRange([]byte(canon), size); r2 != rangePart || s2 != start || e2 != end {
			t.Fatalf("%q of %d: [%d, %d), but %q gives [%d, %d)", v, size, start, end, canon, s2, e2)
		}
	})
}
