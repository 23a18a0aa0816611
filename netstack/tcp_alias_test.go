package netstack

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
)

// remoteEP is a server endpoint that notes each connection's remote end.
type remoteEP struct {
	rrServerEP
	from []netip.AddrPort
}

func (e *remoteEP) Accept(r netip.AddrPort, _ TCPHandle, _ time.Time) TCPApp {
	e.from = append(e.from, r)
	return newRRApp(e.resp)
}

// TestTCPActiveOpenAliases: a client with two ports and two aliases opens
// six connections, Addr's ports first and then each alias's; the server
// resolves each alias by ARP (answered from the alias), checks the
// rewritten headers and sees the six sources; a seventh connect finds no
// port.
func TestTCPActiveOpenAliases(t *testing.T) {
	alias1, alias2 := IPv4Addr{198, 18, 0, 5}, IPv4Addr{198, 18, 0, 6}
	p := &stackPair{now: time.Unix(1_000_000, 0)}
	var err error
	if p.a, err = NewStack(Config{MAC: macA, Addr: ipA, Netmask: mask}); err != nil {
		t.Fatal(err)
	}
	if p.b, err = NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask, Aliases: []IPv4Addr{alias1, alias2}}); err != nil {
		t.Fatal(err)
	}
	p.a.EnableTCP(TCPConfig{MaxConns: 16, Seed: 1})
	p.b.EnableTCP(TCPConfig{MaxConns: 16, Seed: 2, PortLo: 40000, PortHi: 40001})
	p.la, p.lb = NewChanLink(1500, 256), NewChanLink(1500, 256)
	ep := &remoteEP{rrServerEP: rrServerEP{resp: make([]byte, 10)}}
	if err := p.a.ListenTCP(80, ep); err != nil {
		t.Fatal(err)
	}
	var hs []TCPHandle
	for range 6 {
		h, err := p.b.ConnectTCP(p.now, ipA, 80, &rrClient{respLen: 10}, &relCount{})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if _, err := p.b.ConnectTCP(p.now, ipA, 80, &rrClient{respLen: 10}, &relCount{}); !errors.Is(err, ErrTCPNoPort) {
		t.Fatalf("seventh connect: %v, want ErrTCPNoPort", err)
	}
	for range 50 {
		p.step()
	}
	for i, h := range hs {
		if !p.b.TCPEstablished(h) {
			t.Fatalf("connection %d not established: client %+v, server %+v, ip %+v", i, p.b.TCPStats(), p.a.TCPStats(), p.a.Stats())
		}
	}
	var want []netip.AddrPort
	for _, a := range []IPv4Addr{ipB, alias1, alias2} {
		for _, port := range []uint16{40000, 40001} {
			want = append(want, netip.AddrPortFrom(a.AsNetip(), port))
		}
	}
	slices.SortFunc(ep.from, func(x, y netip.AddrPort) int { return x.Compare(y) })
	if !slices.Equal(ep.from, want) {
		t.Errorf("server accepted from %v, want %v", ep.from, want)
	}
	if st := p.a.Stats(); st.IPv4BadChecksum != 0 {
		t.Errorf("server: %d bad IPv4 checksums in the aliases' headers", st.IPv4BadChecksum)
	}
}

// TestAliasARPAndEcho: an alias is answered as the address is, from the
// alias: ARP who-has and ICMP echo.
func TestAliasARPAndEcho(t *testing.T) {
	alias := IPv4Addr{198, 18, 0, 9}
	c := newTestCtx(t, func(c *Config) { c.Aliases = []IPv4Addr{alias} })
	c.send(arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, alias))
	c.expect(arpFrame(t, macA, macB, ARPReply, macA, alias, macB, ipB))
	c.send(echoFrame(t, macB, macA, ipB, alias, ipOpts{id: 1, flags: layers.IPv4DontFragment}, false, 0, 0, nil))
	c.expect(echoFrame(t, macA, macB, alias, ipB, ipOpts{flags: layers.IPv4DontFragment}, true, 0, 0, nil))
}

func TestStackAliasChecked(t *testing.T) {
	for _, a := range []IPv4Addr{ipB, {198, 18, 1, 5}, {198, 18, 0, 255}, {198, 18, 0, 0}} {
		if _, err := NewStack(Config{MAC: macB, Addr: ipB, Netmask: mask, Aliases: []IPv4Addr{a}}); err == nil {
			t.Errorf("alias %v of %v/24 accepted", a, ipB)
		}
	}
}
