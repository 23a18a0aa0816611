package netstack

import "time"

// Receive-frame backpressure. A link such as AF_XDP receives into a fixed
// set of frames, one a segment however small; when more segments arrive
// between two polls than it has frames, the link drops them and the peers
// time out and send them again, which takes still more frames. Bytes are
// held back by the receive window, but a window bounds bytes, not
// segments: a hundred thousand connections of one small request each
// overrun a few ten thousand frames within their windows.
//
// What draws segments in is what we send: new data, with nothing of the
// connection's in flight, brings back at least one segment (its ACK, or in
// a request-response protocol the next request). So the link's owner gives
// TCP a credit each poll, the receive frames it has to spare (FlightCredit),
// and a connection starts a new flight only against it. Without credit the
// connection waits in a FIFO and goes, in turn, at a later poll: the
// backlog stays in the connections (a handle each) rather than in frames,
// and each connection's wait is the queue's, in order.
// A connection waits at most maxHold: an app's own timeouts (httpd's) run
// while its answer waits, and a wait that long means the frames are held
// elsewhere. Data already in flight, retransmissions, ACKs and handshakes
// are never held: they answer segments already counted, or repair (a burst
// of SYNs is absorbed by the backlog and cookies, and the first requests it
// brings are a connection each).

// tcpHeld is the FIFO of connections waiting for credit, and the record
// of the flights credit let go that may not have been answered yet.
type tcpHeld struct {
	ring      []int32 // ids of the conns waiting, oldest at head; each id at most once
	since     []int64 // when each entry of ring began to wait
	turn      []int32 // by id: the generation of the conn its ring entry runs; 0: none
	head, n   int
	credit    int  // new flights this poll may still start; < 0: no limit
	releasing bool // releaseHeld is running: the head of the FIFO goes first
	overdue   bool // releaseHeld lets an entry past maxHold go without credit

	// flights is a ring of the ids of conns that started a flight under
	// credit, each at most once (bit set in flying). A flight ends when
	// all its data is acknowledged or the conn closes; sweepFlights drops
	// the ended ones from the head and moves those still in flight to the
	// tail, checking about as many a poll as flights start, so that
	// flightsOut follows the flights outstanding from above.
	flights     []int32
	flightsHead int // oldest record in flights
	flightsOut  int // records in flights: flights maybe unanswered
	flying      []uint64
	started     int // flights recorded since the last sweep
}

// maxHold bounds a connection's wait for credit.
const maxHold = int64(100 * time.Millisecond)

// sweepSpare is how many flights a sweep checks beyond those started
// since the last, so that the record catches up when starts stop.
const sweepSpare = 16

// FlightCredit tells TCP the segments the link can still receive: n
// frames (n < 0: any number, the default). Every new flight of data draws
// at least one segment in, so connections start new flights only while the
// flights unanswered stay under n; the others wait in order for a later
// poll. The owner of a link that receives into a fixed set of frames
// calls it before each Poll.
func (s *Stack) FlightCredit(n int) {
	if s.tcp != nil {
		s.tcp.flightCredit(n)
	}
}

func (l *tcpLayer) flightCredit(n int) {
	q := &l.held
	if n < 0 {
		q.credit = -1
		return
	}
	if q.ring == nil {
		m := l.cfg.MaxConns
		q.ring = make([]int32, m)
		q.since = make([]int64, m)
		q.turn = make([]int32, m)
		q.flights = make([]int32, m)
		q.flying = make([]uint64, (m+63)/64)
	}
	l.sweepFlights(q.started + sweepSpare)
	q.started = 0
	q.credit = max(n-q.flightsOut, 0)
}

// sweepFlights checks up to k recorded flights, oldest first.
func (l *tcpLayer) sweepFlights(k int) {
	q := &l.held
	for range min(k, q.flightsOut) {
		id := q.flights[q.flightsHead]
		q.flightsHead = (q.flightsHead + 1) % len(q.flights)
		if c := l.conns[id]; c.state != tcpClosed && c.sndMax != c.sndUna {
			q.flights[(q.flightsHead+q.flightsOut-1)%len(q.flights)] = id // still in flight: to the tail
			continue
		}
		q.flightsOut--
		q.flying[id/64] &^= 1 << (id % 64)
	}
}

// holdFlight reports whether c, about to send new data with nothing in
// flight, must wait for credit; it then joins the FIFO (once) and is
// counted. A flight that goes is recorded.
func (l *tcpLayer) holdFlight(c *tcpConn) bool {
	q := &l.held
	if q.credit < 0 {
		return false
	}
	if (q.credit > 0 && (q.n == 0 || q.releasing) || q.overdue) && int(c.id) < len(q.ring) {
		q.credit = max(q.credit-1, 0)
		if bit := uint64(1) << (c.id % 64); q.flying[c.id/64]&bit == 0 {
			q.flying[c.id/64] |= bit
			q.flights[(q.flightsHead+q.flightsOut)%len(q.flights)] = c.id
			q.flightsOut++
			q.started++
		}
		return false
	}
	if c.lastAck != c.rcvNxt {
		// The data that made us answer is acknowledged now, not with
		// the answer: its sender's loss probe would fire while we wait.
		c.ackNow = true
	}
	if c.woken {
		return true // queued already (woken or held): it runs output again
	}
	if int(c.id) >= len(q.turn) {
		return false // cannot happen: ids stay under MaxConns
	}
	c.woken = true
	if q.turn[c.id] == 0 {
		i := (q.head + q.n) % len(q.ring)
		q.ring[i], q.since[i] = c.id, l.now
		q.n++
	}
	// Else a conn that closed while it waited had this slot: c takes its
	// turn (and its wait so far), so that entries never outnumber slots
	// however often a peer opens, asks and resets.
	q.turn[c.id] = c.gen
	l.stats.FlightsHeld++
	return true
}

// releaseHeld runs the output of held connections, oldest first, while the
// poll's credit lasts, and of those that waited maxHold without it.
func (l *tcpLayer) releaseHeld() {
	q := &l.held
	q.releasing = true
	for q.n > 0 {
		q.overdue = q.credit == 0 && l.now-q.since[q.head] >= maxHold
		if q.credit == 0 && !q.overdue {
			break
		}
		id := q.ring[q.head]
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		h := TCPHandle{id: id, gen: q.turn[id]}
		q.turn[id] = 0
		if l.rerun(h) && q.overdue {
			l.stats.HeldOverdue++
		}
	}
	q.releasing, q.overdue = false, false
	if q.n > 0 {
		l.stats.HeldPolls++
	}
}
