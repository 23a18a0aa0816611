package netstack

import (
	"testing"
	"time"
)

const (
	A   = TCPFlagACK
	S   = TCPFlagSYN
	F   = TCPFlagFIN
	R   = TCPFlagRST
	P   = TCPFlagPSH
	SA  = TCPFlagSYN | TCPFlagACK
	FA  = TCPFlagFIN | TCPFlagACK
	PA  = TCPFlagPSH | TCPFlagACK
	FPA = TCPFlagFIN | TCPFlagPSH | TCPFlagACK
)

func fl(flags uint8, seq, ack uint32, win uint16) TCPFields {
	return TCPFields{Flags: flags, Seq: seq, Ack: ack, Window: win}
}

// LISTEN + SYN with every option -> SYN-ACK with the options negotiated,
// then the ACK -> ESTABLISHED and Accept.
func TestTCPPassiveOpen(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.RcvBuf = 256 << 10 // 2^18 needs window scale 3
	x := newTCPTest(t, cfg)
	syn := fl(S, tIRS, 0, 64240)
	syn.MSS, syn.HasWScale, syn.WScale, syn.SACKPermitted = 1400, true, 7, true
	syn.HasTimestamp, syn.TSVal = true, 777
	x.send(seg{TCPFields: syn})

	iss := uint32(x.l.sec.isnFor(x.key, 0))
	c := x.conn()
	synack := fl(SA, iss, tIRS+1, 65535)
	synack.MSS, synack.HasWScale, synack.WScale, synack.SACKPermitted = 1460, true, 3, true
	synack.HasTimestamp, synack.TSVal, synack.TSEcr = true, c.tsOff, 777
	x.expect(seg{TCPFields: synack})
	x.state(tcpSynRcvd)
	if c.mss != 1400-12 || c.sndWScale != 7 || !c.sackOK || !c.tsOK {
		t.Fatalf("negotiated mss %d ws %d sack %v ts %v", c.mss, c.sndWScale, c.sackOK, c.tsOK)
	}
	if len(x.ep.apps) != 0 {
		t.Fatal("Accept called before the handshake completed")
	}

	x.now = x.now.Add(3 * time.Millisecond)
	ack := fl(A, tIRS+1, iss+1, 502) // 502<<7 = 64256
	ack.HasTimestamp, ack.TSVal, ack.TSEcr = true, 778, c.tsOff
	x.send(seg{TCPFields: ack})
	x.expectNothing()
	x.state(tcpEstablished)
	if len(x.ep.apps) != 1 || x.ep.remote.String() != "198.18.0.2:40000" {
		t.Fatalf("Accept calls %d, remote %v", len(x.ep.apps), x.ep.remote)
	}
	if c.sndWnd != 502<<7 || c.srtt != int64(3*time.Millisecond) || c.tsRecent != 778 {
		t.Fatalf("snd.wnd %d srtt %d ts.recent %d", c.sndWnd, c.srtt, c.tsRecent)
	}
	st := x.stats()
	if st.PassiveOpens != 1 || st.Conns != 1 || st.SynRcvd != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A SYN without options: MSS 536 (RFC 9293 3.7.1), no scaling, no SACK, no
// timestamps in the SYN-ACK.
func TestTCPPassiveOpenNoOptions(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	iss := uint32(x.l.sec.isnFor(x.key, 0))
	synack := fl(SA, iss, tIRS+1, 32768)
	synack.MSS = 1460
	x.expect(seg{TCPFields: synack})
	if c := x.conn(); c.mss != 536 || c.wsOK || c.sackOK || c.tsOK {
		t.Fatalf("negotiated %+v", c)
	}
}

func TestTCPNoListenerRST(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	// CLOSED, no ACK: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
	x.send(seg{TCPFields: TCPFields{DstPort: 81, Flags: S, Seq: 77}})
	x.expect(seg{TCPFields: TCPFields{SrcPort: 81, Flags: R | A, Ack: 78}})
	// With ACK: <SEQ=SEG.ACK><CTL=RST>.
	x.send(seg{TCPFields: TCPFields{DstPort: 81, Flags: PA, Seq: 77, Ack: 99}, data: "hi"})
	x.expect(seg{TCPFields: TCPFields{SrcPort: 81, Flags: R, Seq: 99}})
	// A RST gets nothing.
	x.send(seg{TCPFields: TCPFields{DstPort: 81, Flags: R, Seq: 77}})
	x.expectNothing()
	if st := x.stats(); st.NoPortRST != 2 || st.NoConnDrop != 1 || st.ResetsOut != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTCPListenStrays(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.send(seg{TCPFields: fl(R, 1, 0, 0)}) // LISTEN first: RST ignored
	x.expectNothing()
	x.send(seg{TCPFields: fl(A, 1, 2, 100)}) // second: ACK -> RST
	x.expect(seg{TCPFields: fl(R, 2, 0, 0)})
	x.send(seg{TCPFields: fl(P, 1, 0, 100), data: "x"}) // fourth: drop
	x.expectNothing()
	if st := x.stats(); st.NoConnDrop != 2 || st.SynCookiesNoOverflow != 1 || st.Conns != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// SYN-RECEIVED: the SYN-ACK is retransmitted with backoff, then the TCB is
// dropped after SynRetries.
func TestTCPSynRcvdRetransmit(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.SynRetries = 2
	x := newTCPTest(t, cfg)
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	iss := uint32(x.l.sec.isnFor(x.key, 0))
	synack := fl(SA, iss, tIRS+1, 32768)
	synack.MSS = 1460
	x.expect(seg{TCPFields: synack})
	x.advance(999 * time.Millisecond)
	x.expectNothing()
	x.advance(time.Millisecond) // RTO 1 s
	x.expect(seg{TCPFields: synack})
	// The peer's SYN again is answered at once with the SYN-ACK.
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.expect(seg{TCPFields: synack})
	x.advance(2 * time.Second) // backed off to 2 s
	x.expect(seg{TCPFields: synack})
	x.advance(4 * time.Second)
	x.expectNothing()
	x.state(tcpClosed)
	if st := x.stats(); st.SynRcvdTimeout != 1 || st.Retransmits != 3 || st.Conns != 0 || st.SynRcvd != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(x.l.timers.h) != 0 {
		t.Fatal("timer left armed")
	}
}

// SYN-RECEIVED + an ACK that does not acknowledge our SYN -> RST.
func TestTCPSynRcvdBadAck(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.recv()
	x.send(seg{TCPFields: fl(A, tIRS+1, 12345, 8192)})
	x.expect(seg{TCPFields: fl(R, 12345, 0, 0)})
	x.state(tcpSynRcvd)
}

func TestTCPAcceptRefused(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.ep.refuse = true
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.recv()
	iss := uint32(x.l.sec.isnFor(x.key, 0))
	x.send(seg{TCPFields: fl(A, tIRS+1, iss+1, 8192)})
	x.expect(seg{TCPFields: fl(R, iss+1, 0, 0)})
	x.state(tcpClosed)
	if st := x.stats(); st.AcceptRefused != 1 || st.Conns != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTCPTableFull(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.MaxConns = 2
	x := newTCPTest(t, cfg)
	for p := uint16(1); p <= 3; p++ {
		x.sendFrom(tRemote, p, seg{TCPFields: fl(S, tIRS, 0, 8192)})
	}
	if got := len(x.recv()); got != 2 {
		t.Fatalf("%d SYN-ACKs, want 2", got)
	}
	if st := x.stats(); st.TableFull != 1 || st.Conns != 2 {
		t.Fatalf("stats %+v", st)
	}
}
