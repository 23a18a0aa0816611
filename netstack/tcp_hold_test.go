package netstack

import (
	"testing"
	"time"
)

// TestTCPFlightCredit: with credit for one flight, the first connection
// answers at once; the second holds its answer, acknowledges the request
// at once instead (its sender's loss probe must not fire while it waits),
// and sends the answer at the first poll with credit again, once the first
// flight was acknowledged.
func TestTCPFlightCredit(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	a, appA := x.establish()
	appA.echo = true
	x.key.rport = tRPort + 1
	b, appB := x.establish()
	appB.echo = true

	x.l.flightCredit(1)
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "ping"})
	x.expect(seg{TCPFields: fl(PA, 1001, 5005, 32764), data: "ping"})
	x.sendFrom(tRemote, tRPort+1, seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "pong"})
	ack := fl(A, 1001, 5005, 32764)
	ack.DstPort = tRPort + 1
	x.expect(seg{TCPFields: ack})
	if st := x.stats(); st.FlightsHeld != 1 || x.l.held.n != 1 || x.l.held.flightsOut != 1 {
		t.Fatalf("held %d (counted %d), flights %d", x.l.held.n, st.FlightsHeld, x.l.held.flightsOut)
	}

	// A's flight is unanswered: no credit for B.
	x.l.flightCredit(1)
	x.advance(0)
	x.expectNothing()

	x.send(seg{TCPFields: fl(A, 5005, 1005, 65535)})
	x.expectNothing()
	x.l.flightCredit(1) // finds A's flight answered
	x.advance(0)
	resp := fl(PA, 1001, 5005, 32764)
	resp.DstPort = tRPort + 1
	x.expect(seg{TCPFields: resp, data: "pong"})
	if x.l.held.n != 0 || x.l.held.flightsOut != 1 || b.sndMax == b.sndUna || a.sndMax != a.sndUna {
		t.Fatalf("held %d, flights %d", x.l.held.n, x.l.held.flightsOut)
	}

	// Without a limit nothing waits.
	x.l.flightCredit(-1)
	x.send(seg{TCPFields: fl(PA, 5005, 1005, 65535), data: "ping"})
	x.expect(seg{TCPFields: fl(PA, 1005, 5009, 32760), data: "ping"})
}

// TestTCPFlightCreditOverdue: a connection that waited maxHold for
// credit goes without it, counted.
func TestTCPFlightCreditOverdue(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	_, app := x.establish()
	app.echo = true
	x.l.flightCredit(0)
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "ping"})
	x.expect(seg{TCPFields: fl(A, 1001, 5005, 32764)})
	x.l.flightCredit(0)
	x.advance(time.Duration(maxHold) - 1)
	x.expectNothing()
	x.l.flightCredit(0)
	x.advance(1)
	x.expect(seg{TCPFields: fl(PA, 1001, 5005, 32764), data: "ping"})
	if st := x.stats(); st.HeldOverdue != 1 || x.l.held.n != 0 {
		t.Fatalf("overdue %d, held %d", st.HeldOverdue, x.l.held.n)
	}
}

// TestTCPFlightCreditReusedSlot: a connection that closes while it waits
// for credit leaves its place in the FIFO to the next connection in its
// slot, which waits too and goes in turn: entries never outnumber slots, so a peer that
// opens, asks and resets in a loop cannot fill the FIFO with the dead and
// send past the credit.
func TestTCPFlightCreditReusedSlot(t *testing.T) {
	cfg := tcpTestConfig()
	cfg.MaxConns = 1
	x := newTCPTest(t, cfg)
	for i := range 3 {
		_, app := x.establish()
		app.echo = true
		x.l.flightCredit(0)
		x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "ping"})
		x.expect(seg{TCPFields: fl(A, 1001, 5005, 32764)})
		if x.l.held.n != 1 {
			t.Fatalf("round %d: %d held, want 1", i, x.l.held.n)
		}
		if i == 2 {
			break
		}
		x.send(seg{TCPFields: fl(R, 5005, 0, 0)})
		x.state(tcpClosed)
	}
	x.l.flightCredit(1)
	x.advance(0)
	x.expect(seg{TCPFields: fl(PA, 1001, 5005, 32764), data: "ping"})
	if st := x.stats(); st.FlightsHeld != 3 || x.l.held.n != 0 {
		t.Fatalf("held %d (counted %d)", x.l.held.n, st.FlightsHeld)
	}
}

// TestTCPFlightCreditClosedWhileHeld: a connection reset while it waits
// for credit leaves the FIFO at its turn without counting as let go.
func TestTCPFlightCreditClosedWhileHeld(t *testing.T) {
	x := newTCPTest(t, tcpTestConfig())
	_, app := x.establish()
	app.echo = true
	x.l.flightCredit(0)
	x.send(seg{TCPFields: fl(PA, 5001, 1001, 65535), data: "ping"})
	x.expect(seg{TCPFields: fl(A, 1001, 5005, 32764)})
	x.send(seg{TCPFields: fl(R, 5005, 0, 0)})
	x.state(tcpClosed)
	x.l.flightCredit(0)
	x.advance(time.Duration(maxHold))
	x.expectNothing()
	if st := x.stats(); st.HeldOverdue != 0 || x.l.held.n != 0 {
		t.Fatalf("overdue %d, held %d", st.HeldOverdue, x.l.held.n)
	}
}
