package wreck

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"percore/netstack"
)

// The native client against misbehaving servers on in-memory links: every
// failure is counted in its class, the slot reconnects, and nothing hangs.

// faultApp is a scripted server connection: it answers each complete
// request with reply, and after the reply to request closeAfter (if > 0;
// that one is last when set) closes its side.
type faultApp struct {
	reply, last []byte
	closeAfter  int
	reqs        int
	in          []byte
	out         []byte
	una         int
	outv        [1][]byte
	closing     bool
}

func (a *faultApp) Feed(p []byte, now time.Time) int {
	a.in = append(a.in, p...)
	for {
		i := bytes.Index(a.in, []byte("\r\n\r\n"))
		if i < 0 {
			break
		}
		a.in = a.in[i+4:]
		a.reqs++
		if a.closing {
			continue
		}
		if a.closeAfter > 0 && a.reqs >= a.closeAfter {
			a.closing = true
			if a.last != nil {
				a.out = append(a.out, a.last...)
				continue
			}
		}
		a.out = append(a.out, a.reply...)
	}
	return len(p)
}

func (a *faultApp) Output() [][]byte {
	if a.una == len(a.out) {
		return nil
	}
	a.outv[0] = a.out[a.una:]
	return a.outv[:]
}

func (a *faultApp) Advance(n int)        { a.una += n }
func (a *faultApp) Closing() bool        { return a.closing }
func (a *faultApp) PeerClosed(time.Time) {}

// faultEP makes a faultApp per connection (nil reply: refuse with RST).
type faultEP struct {
	reply, last []byte
	closeAfter  int
	accepted    int
}

func (e *faultEP) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp {
	e.accepted++
	if e.reply == nil {
		return nil
	}
	return &faultApp{reply: e.reply, last: e.last, closeAfter: e.closeAfter}
}

func (e *faultEP) Release(netstack.TCPApp, time.Time) {}

// newFaultPair is an ncPair whose server port 8080 runs ep.
func newFaultPair(t *testing.T, cfg Config, conns int, ep *faultEP) *ncPair {
	t.Helper()
	p := newNCPair(t, cfg, conns, -1)
	if err := p.srv.ListenTCP(8080, ep); err != nil {
		t.Fatal(err)
	}
	p.cl.port = 8080
	return p
}

// runFor steps d of fake time in 10 µs steps with a tick every 10 ms.
func (p *ncPair) runFor(d time.Duration) {
	for i := 0; i < int(d/(10*time.Microsecond)); i++ {
		p.step(10 * time.Microsecond)
		if i%1000 == 999 {
			p.cl.tick()
		}
	}
}

const (
	okReply    = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	closeReply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
)

func TestNativeClientFaults(t *testing.T) {
	for _, c := range []struct {
		name       string
		ep         faultEP
		timeout    time.Duration
		class      errClass
		okRequests bool // some responses complete too
	}{
		{name: "malformed", ep: faultEP{reply: []byte("XTTP/1.1 200 OK\r\n\r\n")}, class: errMalformed},
		{name: "closed mid-body", ep: faultEP{reply: []byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"), closeAfter: 1}, class: errClosed},
		{name: "reset", ep: faultEP{}, class: errReset},
		{name: "stall", ep: faultEP{reply: []byte{}}, timeout: 20 * time.Millisecond, class: errTimeout},
		{name: "server closes unannounced", ep: faultEP{reply: []byte(okReply), closeAfter: 3}, class: errClosed, okRequests: true},
		{name: "head across segments", ep: faultEP{reply: bigHead(5000)}, class: numErrClasses, okRequests: true},
		{name: "oversized head", ep: faultEP{reply: bigHead(20000)}, class: errMalformed},
		{name: "Connection: close", ep: faultEP{reply: []byte(okReply), last: []byte(closeReply), closeAfter: 3}, class: numErrClasses, okRequests: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.timeout > 0 {
				cfg.Timeout = c.timeout
			}
			ep := c.ep
			p := newFaultPair(t, cfg, 2, &ep)
			p.runFor(60 * time.Millisecond)
			cnt := &p.acct.cnt
			if c.class < numErrClasses {
				if cnt.Errors[c.class] < 2 {
					t.Errorf("%d %s errors, want at least 2 (both conns, reconnecting): %v", cnt.Errors[c.class], errClassNames[c.class], cnt.Errors)
				}
				for cls, n := range cnt.Errors {
					if errClass(cls) != c.class && n > 0 {
						t.Errorf("%d %s errors, want only %s: %v", n, errClassNames[cls], errClassNames[c.class], cnt.Errors)
					}
				}
			} else if cnt.failures() != 0 {
				t.Errorf("errors %v, want none", cnt.Errors)
			}
			if (c.class < numErrClasses || c.ep.closeAfter > 0) && ep.accepted < 4 {
				t.Errorf("server accepted %d connections, want the 2 slots to reconnect", ep.accepted)
			}
			if c.name == "oversized head" && cnt.Oversized != cnt.Errors[errMalformed] {
				t.Errorf("%d oversized of %d malformed, want all", cnt.Oversized, cnt.Errors[errMalformed])
			}
			if c.okRequests && cnt.Responses < 30 {
				t.Errorf("%d responses, want a steady flow across reconnects", cnt.Responses)
			}
			if p.acct.issued != int64(p.acct.done)+int64(inFlight(p.cl)) {
				t.Errorf("issued %d, done %d, in flight %d: requests lost", p.acct.issued, p.acct.done, inFlight(p.cl))
			}
		})
	}
}

func inFlight(c *nclient) int {
	n := 0
	for i := range c.conns {
		n += c.conns[i].n
	}
	return n
}

// bigHead is a 200 response whose header section is about n bytes (split
// over several segments), with a 2-byte body.
func bigHead(n int) []byte {
	b := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
	for len(b) < n {
		b = append(b, "X-Pad: 0123456789012345678901234567890123456789012345678901234567890123456789\r\n"...)
	}
	return append(b, "\r\nok"...)
}

// seqEP echoes X-Wreck-Seq on each response, in order.
type seqEP struct{}

func (seqEP) Accept(netip.AddrPort, netstack.TCPHandle, time.Time) netstack.TCPApp { return &seqApp{} }
func (seqEP) Release(netstack.TCPApp, time.Time)                                   {}

type seqApp struct{ faultApp }

func (a *seqApp) Feed(p []byte, now time.Time) int {
	a.in = append(a.in, p...)
	for {
		i := bytes.Index(a.in, []byte("\r\n\r\n"))
		if i < 0 {
			return len(p)
		}
		j := bytes.Index(a.in[:i], []byte("X-Wreck-Seq: "))
		seq := a.in[j+13 : j+29]
		a.out = append(a.out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Wreck-Seq: "...)
		a.out = append(a.out, seq...)
		a.out = append(a.out, "\r\n\r\nok"...)
		a.in = a.in[i+4:]
	}
}
