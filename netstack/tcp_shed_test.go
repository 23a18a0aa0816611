package netstack

import "testing"

// While shedding, a SYN to a listener gets no answer and no state, and is
// counted; a retransmitted SYN after shedding ends opens the connection.
func TestTCPShedSYNs(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	x.l.shedSYNs = true
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.expectNothing()
	if x.conn() != nil || x.stats().SynShed != 1 {
		t.Fatalf("shed SYN kept state or was not counted: %+v", x.stats())
	}
	x.l.shedSYNs = false
	x.send(seg{TCPFields: fl(S, tIRS, 0, 8192)})
	x.state(tcpSynRcvd)
}
