package afxdp

import "testing"

// TestProgramClientPorts: the program as a native client sets it up (wreck
// --network-stack native): our address is the client's, and the port map
// holds the whole source port range (28232 ports by default). A reply from
// the server's port 80 to a source port in the range is redirected; one to
// a port outside it, to the server's own port, or to a port removed again,
// goes to the kernel.
func TestProgramClientPorts(t *testing.T) {
	s := labSocket(t, "pq")
	const lo, hi = 32768, 60999
	p, err := NewProgram(ProgramConfig{IP: otherIP})
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
	if err := p.RemovePort(40000); err != nil {
		t.Fatal(err)
	}
	if act, err := p.Run(tcpSYN(t, ourIP, otherIP, 80, 40000)); err != nil || act != xdpPass {
		t.Errorf("reply to a removed port: action %d (%v), want %d", act, err, xdpPass)
	}
}

// BenchmarkProgramClientPort runs the program, in the kernel, on a reply
// to one of a native client's 64,512 source ports: the per-frame cost of
// its port lookup.
func BenchmarkProgramClientPort(b *testing.B) {
	needRoot(b)
	p, err := NewProgram(ProgramConfig{IP: otherIP})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	for port := 1024; port <= 65535; port++ {
		if err := p.AllowPort(uint16(port)); err != nil {
			b.Fatal(err)
		}
	}
	frame := tcpSYN(b, ourIP, otherIP, 80, 40000)
	b.ResetTimer()
	_, per, err := p.prog.Benchmark(frame, b.N, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(per.Nanoseconds()), "ns/frame")
}
