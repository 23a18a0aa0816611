package httpd

import (
	"strings"
	"testing"
	"unsafe"
)

// testMemory is a Memory with a limit, as netstack.MemBudget behaves.
type testMemory struct{ used, limit int }

func (m *testMemory) Take(n int) { m.used += n }
func (m *testMemory) TryTake(n int) bool {
	if m.used+n > m.limit {
		return false
	}
	m.used += n
	return true
}
func (m *testMemory) Give(n int)     { m.used -= n }
func (m *testMemory) Pressure() bool { return m.used > m.limit*3/4 }

// A body that outgrows the input buffer grows it within the budget; past
// the budget the request is answered 503 and counted. Every byte charged
// is given back or pooled: the budget ends holding exactly the pools.
func TestMemoryBudget(t *testing.T) {
	f := newFixture(t, Config{Docroot: makeDocroot(t), MaxBody: 1 << 20}, testSetup)
	m := &testMemory{limit: 1 << 20}
	f.srv.SetMemory(m)
	body := strings.Repeat("b", 20000)
	rs := readResponses(t, f.feed("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n"+body))
	if len(rs) != 1 || rs[0].status != 200 || rs[0].body != body {
		t.Fatalf("got %d responses", len(rs))
	}
	if m.used == 0 {
		t.Fatal("nothing charged")
	}
	f.srv.Release(f.c)
	if m.used != f.srv.pooled() {
		t.Fatalf("after release %d charged, %d pooled", m.used, f.srv.pooled())
	}

	m.limit = m.used + 8<<10 // room for a 4 KiB buffer, not for the pooled one's next step
	f.c = f.srv.NewConn(testRemote, f.now)
	big := strings.Repeat("b", 100000)
	rs = readResponses(t, f.feed("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+big))
	if len(rs) != 1 || rs[0].status != 503 || !f.c.Closing() || f.srv.Stats().MemoryShed != 1 {
		t.Fatalf("got %d responses (status %d), closing %v, %+v", len(rs), rs[0].status, f.c.Closing(), f.srv.Stats())
	}
	f.srv.Release(f.c)
	if m.used != f.srv.pooled() {
		t.Fatalf("after release %d charged, %d pooled", m.used, f.srv.pooled())
	}

	// Under pressure buffers given back are dropped, not pooled.
	m.limit = f.srv.pooled() + 1
	f.c = f.srv.NewConn(testRemote, f.now)
	f.feed("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	f.srv.Release(f.c)
	if m.used != f.srv.pooled() || m.used >= m.limit {
		t.Fatalf("under pressure %d charged, %d pooled", m.used, f.srv.pooled())
	}
}

// pooled is the bytes of the buffers s's pools hold.
func (s *Server) pooled() int {
	n := 0
	for _, b := range s.ins {
		n += cap(b)
	}
	for _, b := range s.arenas {
		n += cap(b)
	}
	return n
}

// An idle keep-alive connection holds no buffer and no exchange: they go
// back to the server once its response is advanced, and the next request
// takes them again. A request that arrives in parts keeps its exchange
// meanwhile.
func TestIdleConnHoldsNothing(t *testing.T) {
	f := newFixture(t, Config{}, testSetup)
	for i := range 3 {
		if rs := readResponses(t, f.feed("GET /api/x HTTP/1.1\r\nHost: x\r\n\r\n")); len(rs) != 1 || rs[0].status != 200 {
			t.Fatalf("request %d: %d responses", i, len(rs))
		}
		if f.c.exchange != nil || f.c.in != nil || len(f.srv.xs) != 1 {
			t.Fatalf("request %d: idle conn holds an exchange %v, input %v; %d pooled", i, f.c.exchange != nil, f.c.in != nil, len(f.srv.xs))
		}
	}
	if out := f.feed("GET /api/x HTTP/1.1\r\n"); out != "" || f.c.exchange == nil {
		t.Fatalf("half a request: output %q, exchange %v", out, f.c.exchange != nil)
	}
	if rs := readResponses(t, f.feed("Host: x\r\n\r\n")); len(rs) != 1 || f.c.exchange != nil {
		t.Fatalf("%d responses, exchange held %v", len(rs), f.c.exchange != nil)
	}
}

// An idle connection costs its Conn in Go's size class: at a million
// connections every byte past a class boundary costs the next class for
// each of them. What a request needs goes in the exchange.
func TestConnSizeClass(t *testing.T) {
	const class = 208 // Go's size classes around it: 192, 208, 224
	if n := unsafe.Sizeof(Conn{}); n > class {
		t.Fatalf("Conn is %d bytes, past the %d-byte size class: put request state in the exchange", n, class)
	}
}
