package netstack

import (
	"errors"
	"time"
)

// The hookup of the TCP layer into a Stack: setup calls, and the sink that
// puts segments into IPv4 frames. Stack holds one *tcpLayer (nil until
// EnableTCP); ipv4Input hands protocol 6 to tcpInput, Poll calls tcpPoll.

var errTCPOff = errors.New("netstack: TCP not enabled: call EnableTCP first")

// EnableTCP sets up the stack's TCP layer. Call once, before the shard
// starts polling; cfg.Addr is the stack's address, and the stack's
// TrustRxChecksums also skips TCP checksum verification.
//
// The MSS we announce is cfg.MSS (default 1460), lowered to the link's MTU
// minus 40 at the first Poll.
func (s *Stack) EnableTCP(cfg TCPConfig) {
	cfg.Addr, cfg.Aliases = s.cfg.Addr, s.cfg.Aliases
	cfg.TrustChecksum = cfg.TrustChecksum || s.cfg.TrustRxChecksums
	s.tcp = newTCPLayer(cfg, &stackTCPSink{s: s}, time.Time{})
}

// tcpMTU fits the MSS to the link once its MTU is known (during Poll).
func (s *Stack) tcpMTU() {
	if s.tcp.mtuSeen || s.mtu <= 40+536 {
		return
	}
	s.tcp.mtuSeen = true
	s.tcp.cfg.MSS = uint16(min(int(s.tcp.cfg.MSS), s.mtu-40))
}

// ListenTCP accepts connections on port; ep makes and releases their apps.
func (s *Stack) ListenTCP(port uint16, ep TCPEndpoint) error {
	if s.tcp == nil {
		return errTCPOff
	}
	return s.tcp.listen(port, ep)
}

// UnlistenTCP closes the listener on port: new SYNs to it get RST, and
// connections it accepted carry on. Unknown ports are ignored.
func (s *Stack) UnlistenTCP(port uint16) {
	if s.tcp != nil {
		s.tcp.unlisten(port)
	}
}

// ConnectTCP opens a connection to dst:port from an ephemeral port that
// passes TCPConfig.PortFilter; the SYN goes out in the next Poll. app gets
// the bytes; ep.Release is called when the connection is gone. The handle
// is for WakeTCP.
func (s *Stack) ConnectTCP(now time.Time, dst IPv4Addr, port uint16, app TCPApp, ep TCPEndpoint) (TCPHandle, error) {
	if s.tcp == nil {
		return TCPHandle{}, errTCPOff
	}
	return s.tcp.connect(now, dst, port, app, ep)
}

// WakeTCP makes the next Poll send what h's app has queued (or its FIN)
// when the app changed outside Feed/Advance. A handle of a connection that
// is gone is ignored.
func (s *Stack) WakeTCP(h TCPHandle) {
	if s.tcp != nil {
		s.tcp.wake(h)
	}
}

// ShedSYNs turns on or off dropping SYNs to listeners (counted in
// TCPStats.SynShed): the owner turns it on while its link runs short of
// transmit frames, so that the frames left go to established connections
// rather than to SYN-ACKs. Clients send a dropped SYN again.
func (s *Stack) ShedSYNs(on bool) {
	if s.tcp != nil {
		s.tcp.shedSYNs = on
	}
}

// FramesShort tells TCP whether the link runs short of frames: while it
// does, TCP holds back as under memory pressure (TCPConfig.Budget): windows
// open no further than a small buffer's worth and new SYNs get cookies, so
// that peers send less until frames come back.
func (s *Stack) FramesShort(on bool) {
	if s.tcp != nil {
		s.tcp.framesShort = on
	}
}

// TCPStats returns the TCP layer's counters (zero when TCP is off).
func (s *Stack) TCPStats() TCPStats {
	if s.tcp == nil {
		return TCPStats{}
	}
	st := s.tcp.stats
	st.RcvBufsUsed = s.tcp.rbufsMade - len(s.tcp.rbufs) - len(s.tcp.rbufsSmall)
	st.RcvBufBytes = s.tcp.rbufBytes
	st.TxRingsUsed = s.tcp.txMade - len(s.tcp.txRings)
	return st
}

// tcpInput takes a TCP segment out of a valid IPv4 packet for us.
func (s *Stack) tcpInput(ip IPv4) {
	if s.tcp == nil {
		s.stats.NoTCP++
		return
	}
	s.stats.IPv4TCP++
	s.tcpMTU()
	s.tcp.input(s.epoch.Add(time.Duration(s.now)), s.rxAge, ip.Src(), ip.Dst(), ip.Payload())
}

// tcpPoll runs TCP's due timers and returns its next deadline on the
// stack's clock.
func (s *Stack) tcpPoll(now time.Time) int64 {
	if s.tcp == nil {
		return noDeadline
	}
	s.tcpMTU()
	d := s.tcp.poll(now)
	if d.IsZero() {
		return noDeadline
	}
	return int64(d.Sub(s.epoch))
}

// stackTCPSink puts TCP segments into IPv4 frames of the stack: the layer
// writes the segment straight into the frame's payload. One interface call
// per segment (tcpSink) keeps the layer testable without a Stack; it costs
// a few ns against the segment's checksum and copy.
type stackTCPSink struct {
	s        *Stack
	f        Frame
	src, dst IPv4Addr
}

func (k *stackTCPSink) tcpBuf(raddr, laddr uint32, n int) []byte {
	f, p, ok := k.s.allocIPv4()
	if !ok {
		return nil
	}
	if n > len(p) {
		k.s.freeTx(f)
		k.s.stats.TxTooBig++
		return nil
	}
	k.f, k.src, k.dst = f, IPv4AddrFromUint32(laddr), IPv4AddrFromUint32(raddr)
	return p
}

func (k *stackTCPSink) tcpSend(n int) {
	k.s.sendIPv4From(k.f, k.src, k.dst, ProtoTCP, n)
	k.f = Frame{}
}
