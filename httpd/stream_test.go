package httpd

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestRandomStreams pipelines requests with bodies of many sizes and framings,
// fed in random pieces, so the input buffer compacts and grows mid-request.
func TestRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	docroot := makeDocroot(t)
	for round := range 20 {
		var in strings.Builder
		var want []string
		for i := range 40 {
			body := strings.Repeat(string(rune('a'+i%26)), rng.IntN(1000))
			switch rng.IntN(4) {
			case 0:
				fmt.Fprintf(&in, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			case 1: // chunked in random chunk sizes, some with extensions
				in.WriteString("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
				for rest := body; len(rest) > 0; {
					k := min(len(rest), 1+rng.IntN(40))
					ext := ""
					if rng.IntN(3) == 0 {
						ext = ";n=v"
					}
					fmt.Fprintf(&in, "%x%s\r\n%s\r\n", k, ext, rest[:k])
					rest = rest[k:]
				}
				in.WriteString("0\r\n\r\n")
			case 2:
				body = "hello file\n"
				in.WriteString("GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
			case 3:
				body = "api:/api/" + fmt.Sprint(i)
				fmt.Fprintf(&in, "GET /api/%d HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", i, strings.Repeat("p", rng.IntN(3000)))
			}
			want = append(want, body)
		}
		f := newFixture(t, Config{Docroot: docroot, MaxBody: 1000}, testSetup)
		var out strings.Builder
		s := in.String()
		for len(s) > 0 {
			k := min(len(s), 1+rng.IntN(5000))
			out.WriteString(f.feed(s[:k]))
			s = s[k:]
		}
		rs := readResponses(t, out.String())
		if len(rs) != len(want) {
			t.Fatalf("round %d: %d responses, want %d", round, len(rs), len(want))
		}
		for i, r := range rs {
			if r.status != 200 || r.body != want[i] {
				t.Fatalf("round %d response %d: %d %q, want %q", round, i, r.status, r.body, want[i])
			}
		}
	}
}

// TestStaticZeroCopy: a static response is the prepared bytes themselves.
func TestStaticZeroCopy(t *testing.T) {
	f := newTestFixture(t)
	f.c.Feed([]byte("GET /big.txt HTTP/1.1\r\nHost: x\r\n\r\n"), f.now)
	out := f.c.Output()
	file := f.srv.cache.m["/big.txt"].file
	last := out[len(out)-1]
	if len(last) != len(file.full) || unsafe.SliceData(last) != unsafe.SliceData(file.full) {
		t.Fatal("static response was copied")
	}
}

func TestHeaderTimeoutSecondRequest(t *testing.T) {
	f := newFixture(t, Config{HeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}, nil)
	f.feed("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	f.now = t0.Add(3 * time.Second)
	f.feed("GET / HTTP/1.1\r\n")
	if want := t0.Add(8 * time.Second); !f.c.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
	}
	f.now = t0.Add(7 * time.Second)
	if rs := readResponses(t, f.feed("Host: x\r\n\r\n")); len(rs) != 1 {
		t.Fatal("second request not answered")
	}
	// Back to the idle timeout, from the last input.
	if want := t0.Add(7*time.Second + time.Minute); !f.c.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", f.c.Deadline(), want)
	}
}
