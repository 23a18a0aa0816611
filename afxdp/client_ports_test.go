package afxdp

import "testing"

// TestProgramClientPorts: the program as a native client sets it up (wreck
// --network-stack native): our address is the client's, and the port map
// holds the whole source port range (28232 ports by default, MaxPorts
// sized to it). A reply from the server's port 80 to a source port in the
// range is redirected; one to a port outside it, or to the server's own
// port, goes to the kernel.
func TestProgramClientPorts(t *testing.T) {
	s := labSocket(t, "pq")
	const lo, hi = 32768, 60999
	p, err := NewProgram(ProgramConfig{IP: otherIP, MaxPorts: hi - lo + 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for port := lo; port <= hi; port++ {
		if err := p.AllowPort(uint16(port)); err != nil {
			t.Fatalf("port %d of %d-%d: %v", port, lo, hi, err)
		}
	}
	if err := p.Register(s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dport uint16
		want  uint32
	}{{lo, xdpRedirect}, {40000, xdpRedirect}, {hi, xdpRedirect}, {lo - 1, xdpPass}, {hi + 1, xdpPass}, {80, xdpPass}} {
		// A SYN-ACK-shaped segment: from the server's port 80 to our source port.
		act, err := p.Run(tcpSYN(t, ourIP, otherIP, 80, c.dport))
		if err != nil {
			t.Fatal(err)
		}
		if act != c.want {
			t.Errorf("reply to port %d: action %d, want %d", c.dport, act, c.want)
		}
	}
	if err := p.AllowPort(hi + 1); err == nil {
		t.Errorf("a port beyond MaxPorts was accepted: the map is larger than asked")
	}
}
