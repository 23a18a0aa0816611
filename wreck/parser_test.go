package wreck

import (
	"bytes"
	"fmt"
	"testing"
)

// parsed is what driving the parser over a byte stream produced.
type parsed struct {
	statuses []int
	closes   []bool
	seqs     []uint64
	end      pres // pMore if the stream ended cleanly, else the error
	mid      bool // the stream ended inside a response
}

// drive feeds stream to a fresh parser in pieces of size step, carrying
// unconsumed bytes over as a conn does, and records every response.
func drive(stream []byte, step int) parsed {
	var p parser
	p.maxHead = 256
	p.reset()
	var out parsed
	var carry []byte
	for off := 0; off < len(stream); off += step {
		data := append(carry, stream[off:min(off+step, len(stream))]...)
		carry = nil
		for i := 0; i < len(data); {
			n, r := p.feed(data[i:])
			if n < 0 || n > len(data)-i {
				panic(fmt.Sprintf("feed consumed %d of %d", n, len(data)-i))
			}
			i += n
			switch r {
			case pMore:
				carry = append([]byte(nil), data[i:]...)
				i = len(data)
			case pDone:
				out.statuses = append(out.statuses, p.status)
				out.closes = append(out.closes, p.close)
				out.seqs = append(out.seqs, p.seq)
			default:
				out.end = r
				return out
			}
		}
	}
	out.mid = p.midResponse(len(carry))
	return out
}

func TestParserValid(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		statuses []int
		close    bool // of the last response
		mid      bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", []int{200}, false, false},
		{"two pipelined", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", []int{200, 404}, false, false},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", []int{200}, false, false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\n\r\n", []int{200}, false, false},
		{"chunked trailer", "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\na\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", []int{200}, false, false},
		{"close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n", []int{200}, true, false},
		{"http10", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", []int{200}, true, false},
		{"http10 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", []int{200}, false, false},
		{"204 ignores length", "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n", []int{204, 304}, false, false},
		{"100 continue skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", []int{200}, false, false},
		{"duplicate equal length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", []int{200}, false, false},
		{"cut in body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", nil, false, true},
		{"cut in head", "HTTP/1.1 200 OK\r\nContent-", nil, false, true},
		{"cut in chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", nil, false, true},
		{"until close", "HTTP/1.1 200 OK\r\n\r\nbody until the end", nil, false, false},
	}
	for _, tt := range tests {
		for step := 1; step <= len(tt.in); step++ {
			got := drive([]byte(tt.in), step)
			if got.end != pMore {
				t.Fatalf("%s step %d: ended with %d, want a clean end", tt.name, step, got.end)
			}
			if fmt.Sprint(got.statuses) != fmt.Sprint(tt.statuses) {
				t.Fatalf("%s step %d: statuses %v, want %v", tt.name, step, got.statuses, tt.statuses)
			}
			if len(got.closes) > 0 && got.closes[len(got.closes)-1] != tt.close {
				t.Fatalf("%s step %d: close %v, want %v", tt.name, step, !tt.close, tt.close)
			}
			if got.mid != tt.mid {
				t.Fatalf("%s step %d: mid-response %v, want %v", tt.name, step, got.mid, tt.mid)
			}
		}
	}
}

func TestParserInvalid(t *testing.T) {
	big := "HTTP/1.1 200 OK\r\nX-Big: " + string(bytes.Repeat([]byte("a"), 300)) + "\r\nContent-Length: 0\r\n\r\n"
	tests := []struct {
		name string
		in   string
		want pres
	}{
		{"not http", "HTTP/2.0 200 OK\r\n\r\n", pMalformed},
		{"garbage", "hello world\r\n\r\n", pMalformed},
		{"bad status", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", pMalformed},
		{"status 099", "HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n", pMalformed},
		{"no space", "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n", pMalformed},
		{"no colon", "HTTP/1.1 200 OK\r\nContent-Length 0\r\n\r\n", pMalformed},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", pMalformed},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", pMalformed},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", pMalformed},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", pMalformed},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", pMalformed},
		{"chunked and length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", pMalformed},
		{"gzip coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", pMalformed},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", pMalformed},
		{"chunk overflow", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", pMalformed},
		{"chunk without crlf", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", pMalformed},
		{"101", "HTTP/1.1 101 Switching Protocols\r\n\r\n", pMalformed},
		{"oversized head", big, pOversized},
		{"endless head", "HTTP/1.1 200 OK\r\n" + string(bytes.Repeat([]byte("X: 1\r\n"), 100)), pOversized},
		{"bad seq", "HTTP/1.1 200 OK\r\nX-Wreck-Seq: zz\r\nContent-Length: 0\r\n\r\n", pMalformed},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 7, len(tt.in)} {
			if got := drive([]byte(tt.in), step); got.end != tt.want {
				t.Errorf("%s step %d: got %d, want %d", tt.name, step, got.end, tt.want)
			}
		}
	}
}

func TestParserSeq(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nx-wreck-seq: 00000000000000ff\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Wreck-Seq: 100\r\n\r\n"
	got := drive([]byte(in), len(in))
	if fmt.Sprint(got.seqs) != "[255 256]" {
		t.Fatalf("seqs %v, want [255 256]", got.seqs)
	}
}

func TestParserNoAllocs(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello" +
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	var p parser
	p.maxHead = defaultMaxHead
	allocs := testing.AllocsPerRun(1000, func() {
		p.reset()
		for off := 0; off < len(in); {
			n, r := p.feed(in[off:])
			off += n
			if r != pDone {
				t.Fatalf("result %d at %d", r, off)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

func FuzzParser(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), uint8(3))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), uint8(1))
	f.Add([]byte("HTTP/1.0 100 x\r\n\r\nHTTP/1.1 204 x\r\n\r\n"), uint8(9))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		drive(in, int(step)+1) // panics on a bad consumed count
		var p parser
		p.maxHead = 256
		allocs := testing.AllocsPerRun(1, func() {
			p.reset()
			for off := 0; off < len(in); {
				n, r := p.feed(in[off:])
				off += n
				if r != pDone {
					break
				}
			}
		})
		if allocs != 0 {
			t.Fatalf("%v allocations", allocs)
		}
	})
}

func BenchmarkParser(b *testing.B) {
	in := []byte("HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Mon, 30 Nov 2026 22:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!")
	var p parser
	p.maxHead = defaultMaxHead
	p.reset()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, r := p.feed(in); r != pDone {
			b.Fatal(r)
		}
	}
}
