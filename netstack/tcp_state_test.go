package netstack

import "testing"

// One row per (state, segment): the fixture is built directly in the state,
// the segment sent, and the exact answer and next state asserted. Our FIN,
// where sent, is at 1001; the peer's, where received, at 5001.
func TestTCPStateTable(t *testing.T) {
	rows := []struct {
		state tcpState
		name  string
		in    seg
		want  []seg
		next  tcpState
	}{
		{tcpSynRcvd, "ACK of SYN-ACK", seg{TCPFields: fl(A, 5001, 1001, 1000)}, nil, tcpEstablished},
		{tcpEstablished, "data", seg{TCPFields: fl(A, 5001, 1001, 1000), data: "d"}, nil, tcpEstablished},
		{tcpEstablished, "FIN", seg{TCPFields: fl(FA, 5001, 1001, 1000)}, []seg{{TCPFields: fl(A, 1001, 5002, 32767)}}, tcpCloseWait},
		{tcpFinWait1, "ACK of FIN", seg{TCPFields: fl(A, 5001, 1002, 1000)}, nil, tcpFinWait2},
		{tcpFinWait1, "FIN", seg{TCPFields: fl(FA, 5001, 1001, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpClosing},
		{tcpFinWait1, "FIN+ACK of FIN", seg{TCPFields: fl(FA, 5001, 1002, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpTimeWait},
		{tcpFinWait1, "old ACK", seg{TCPFields: fl(A, 5001, 1001, 1000)}, nil, tcpFinWait1},
		{tcpFinWait2, "data", seg{TCPFields: fl(A, 5001, 1002, 1000), data: "d"}, nil, tcpFinWait2},
		{tcpFinWait2, "FIN", seg{TCPFields: fl(FA, 5001, 1002, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpTimeWait},
		{tcpClosing, "ACK of FIN", seg{TCPFields: fl(A, 5002, 1002, 1000)}, nil, tcpTimeWait},
		{tcpClosing, "FIN again", seg{TCPFields: fl(FA, 5001, 1001, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpClosing},
		{tcpTimeWait, "FIN again", seg{TCPFields: fl(FA, 5001, 1002, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpTimeWait},
		{tcpTimeWait, "data", seg{TCPFields: fl(A, 5002, 1002, 1000), data: "late"}, nil, tcpTimeWait},
		{tcpCloseWait, "FIN again", seg{TCPFields: fl(FA, 5001, 1001, 1000)}, []seg{{TCPFields: fl(A, 1001, 5002, 32767)}}, tcpCloseWait},
		{tcpCloseWait, "ACK", seg{TCPFields: fl(A, 5002, 1001, 1000)}, nil, tcpCloseWait},
		{tcpLastAck, "ACK of FIN", seg{TCPFields: fl(A, 5002, 1002, 1000)}, nil, tcpClosed},
		{tcpLastAck, "old ACK", seg{TCPFields: fl(A, 5002, 1001, 1000)}, nil, tcpLastAck},
		{tcpLastAck, "ACK beyond FIN", seg{TCPFields: fl(A, 5002, 1003, 1000)}, []seg{{TCPFields: fl(A, 1002, 5002, 32767)}}, tcpLastAck},
	}
	for _, r := range rows {
		t.Run(r.state.String()+"/"+r.name, func(t *testing.T) {
			x := newTCPTest(t, tcpTestConfig())
			if r.state == tcpSynRcvd {
				c, _ := x.establish()
				x.l.setState(c, tcpSynRcvd)
				c.sndUna, c.app, c.rtxAt = tISS, nil, x.l.now+c.rto
				x.l.schedule(c)
			} else {
				x.inState(r.state)
			}
			x.send(r.in)
			x.expect(r.want...)
			x.state(r.next)
		})
	}
}
