package netstack

import "time"

// tcpTimers is a 4-ary min-heap of conn ids on their deadlines, with each
// conn's position beside it. Both arrays are pointer-free, so the collector
// never scans them, and a sift compares deadlines held in the entries
// without touching a conn: with hundreds of thousands of conns armed, a
// pointer chase per comparison was a cache miss each. Rescheduling is
// O(log n) and allocates nothing.
type tcpTimers struct {
	h   []tcpTimer // heap order
	pos []int32    // conn id -> index in h + 1; 0 when not armed
}

// tcpTimer is a heap entry: a conn's earliest deadline and its id.
type tcpTimer struct {
	at int64
	id int32
}

// heapArity is 4: half the levels of a binary heap, and a node's children
// share a cache line.
const heapArity = 4

func (q *tcpTimers) init(conns int) {
	q.h = make([]tcpTimer, 0, conns)
	q.pos = make([]int32, conns)
}

// set places e at index i.
func (q *tcpTimers) set(i int, e tcpTimer) {
	q.h[i] = e
	q.pos[e.id] = int32(i + 1)
}

func (q *tcpTimers) up(i int) {
	e := q.h[i]
	for i > 0 {
		p := (i - 1) / heapArity
		if q.h[p].at <= e.at {
			break
		}
		q.set(i, q.h[p])
		i = p
	}
	q.set(i, e)
}

func (q *tcpTimers) down(i int) {
	e, n := q.h[i], len(q.h)
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		m := first
		for k := first + 1; k < min(first+heapArity, n); k++ {
			if q.h[k].at < q.h[m].at {
				m = k
			}
		}
		if q.h[m].at >= e.at {
			break
		}
		q.set(i, q.h[m])
		i = m
	}
	q.set(i, e)
}

// update arms conn id at deadline at (0: disarms it).
func (q *tcpTimers) update(id int32, at int64) {
	if int(id) >= len(q.pos) {
		if at == 0 {
			return
		}
		q.pos = append(q.pos, make([]int32, int(id)+1-len(q.pos))...)
	}
	i := int(q.pos[id]) - 1
	switch {
	case at == 0:
		q.remove(id)
	case i < 0:
		q.h = append(q.h, tcpTimer{at: at, id: id})
		q.up(len(q.h) - 1)
	case at < q.h[i].at:
		q.h[i].at = at
		q.up(i)
	default:
		q.h[i].at = at
		q.down(i)
	}
}

// remove takes conn id out of the heap, if it is there.
func (q *tcpTimers) remove(id int32) {
	if int(id) >= len(q.pos) || q.pos[id] == 0 {
		return
	}
	i := int(q.pos[id]) - 1
	q.pos[id] = 0
	last := len(q.h) - 1
	e := q.h[last]
	q.h = q.h[:last]
	if i == last {
		return
	}
	q.set(i, e)
	q.down(i)
	q.up(i)
}

// schedule recomputes c's deadline from its timers and places it in the heap.
func (l *tcpLayer) schedule(c *tcpConn) {
	d := int64(0)
	for _, t := range [5]int64{c.rtxAt, c.ackAt, c.kaAt, c.appAt, c.rackAt} {
		if t != 0 && (d == 0 || t < d) {
			d = t
		}
	}
	c.deadline = d
	l.timers.update(c.id, d)
}

// fire runs c's timers that are due.
func (l *tcpLayer) fire(c *tcpConn) {
	now := l.now
	if c.ackAt != 0 && c.ackAt <= now {
		c.ackAt = 0
		if c.segsUnacked > 0 || c.ackNow {
			l.stats.DelayedAcks++
			l.sendAck(c)
		}
	}
	if c.rtxAt != 0 && c.rtxAt <= now {
		c.rtxAt = 0
		l.rtxTimer(c)
		if c.state == tcpClosed {
			return
		}
	}
	if c.rackAt != 0 && c.rackAt <= now {
		c.rackAt = 0
		l.reorderTimeout(c)
		if c.state == tcpClosed {
			return
		}
	}
	if c.kaAt != 0 && c.kaAt <= now {
		c.kaAt = 0
		l.keepTimer(c)
		if c.state == tcpClosed {
			return
		}
	}
	if c.appAt != 0 && c.appAt <= now {
		c.appAt = 0
		if c.appTimer != nil && c.appTimer.Expire(l.nowT) {
			// The app timed out and dropped its output (httpd's
			// contract). Nothing in flight and nothing left: an
			// orderly FIN; otherwise the byte stream cannot be
			// finished, so abort.
			l.stats.AppTimeouts++
			// The verdict is given once: TCP closes from here on
			// its own timers, while the app, attached until
			// TIME_WAIT, may still report the deadline it passed.
			c.appTimer = nil
			bufs, _, _ := l.sendQueue(c)
			if c.sndMax == c.sndUna && len(bufs) == 0 {
				l.output(c)
			} else {
				l.sendReset(c)
				l.closeConn(c)
				return
			}
		}
		if c.state != tcpClosed {
			l.appDeadline(c)
		}
	}
}

// rtxTimer is the one per-connection timer whose meaning depends on state:
// SYN/SYN-ACK retransmission, RTO, persist, FIN-WAIT-2 and TIME-WAIT.
func (l *tcpLayer) rtxTimer(c *tcpConn) {
	switch {
	case c.state == tcpTimeWait:
		// RFC 9293 3.10.8: "If the time-wait timeout expires on a
		// connection, delete the TCB".
		l.stats.TimeWaitDone++
		l.closeConn(c)
	case c.state == tcpFinWait2:
		// Not in the RFC: an orphaned FIN-WAIT-2 would last forever if
		// the peer never sends FIN (Linux tcp_fin_timeout).
		l.stats.FinWait2Timeout++
		l.closeConn(c)
	case c.state == tcpSynSent && c.sndMax == c.iss:
		l.sendSyn(c, false) // the first SYN of connect
	case c.state == tcpSynRcvd || c.state == tcpSynSent:
		if int(c.retries) >= l.cfg.SynRetries {
			if c.state == tcpSynRcvd {
				l.stats.SynRcvdTimeout++
			} else {
				l.stats.SynSentTimeout++
			}
			l.closeConn(c)
			return
		}
		c.retries++
		c.rto = min(2*c.rto, int64(l.cfg.RTOMax))
		l.stats.Retransmits++
		l.sendSyn(c, c.state == tcpSynRcvd)
	case c.tlp:
		l.sendLossProbe(c)
	case c.persist:
		// RFC 9293 3.8.6.1 zero-window probe. Like Linux we probe with
		// an old sequence number and no data, so the peer answers with
		// an ACK carrying its window and nothing enters the send queue.
		l.stats.PersistProbes++
		c.persist = false
		c.rto = min(2*c.rto, int64(l.cfg.RTOMax))
		l.sendProbe(c)
		l.output(c) // re-arms persist if the window is still zero
	default:
		l.rtoExpired(c)
	}
}

// rtoExpired handles a retransmission timeout, RFC 6298 §5.4-5.7 and RFC 5681 §3.1.
func (l *tcpLayer) rtoExpired(c *tcpConn) {
	if c.sndMax == c.sndUna {
		l.output(c) // a send that found no tx frame: try again
		return
	}
	l.stats.RTOTimeouts++
	c.tlp = false
	if int(c.retries) >= l.cfg.Retries {
		l.stats.RTOAborts++
		l.sendReset(c)
		l.closeConn(c)
		return
	}
	if c.retries == 0 && !c.recovery {
		l.saveUndo(c) // RFC 3708 applies to a timeout's go-back-N too
	}
	c.rackAt = 0
	// RFC 5681 (4): ssthresh from the algorithm; cwnd = 1 segment.
	l.ccTimeout(c)
	c.retries++
	c.cwnd = uint32(c.mss)
	// RFC 6582 §3.2 (4): after a timeout, recover = highest sent.
	c.recovery, c.prrOn = false, false
	c.recover = c.sndMax
	c.dupAcks = 0
	// RFC 6298 5.5: back off; Karn: no RTT sample from retransmitted data.
	c.rto = min(2*c.rto, int64(l.cfg.RTOMax))
	c.rttOn = false
	// RFC 6675 §5.1 (and RFC 2018 §8): after a timeout the SACKs heard
	// so far are not to be trusted, as the receiver may have reneged and
	// dropped what it SACKed; go back N from SND.UNA over all of it. SACKs
	// that arrive after the timeout build the scoreboard again.
	if c.nsacked > 0 {
		l.stats.SACKCleared++
		c.nsacked = 0
	}
	c.sndNxt = c.sndUna
	if c.sndWnd == 0 {
		// The peer shrank its window to zero under data in flight: the
		// retransmission of the first segment is the window probe
		// (Linux does the same); its ACK resets the retry count.
		l.retransmitAt(c, c.sndUna)
		c.sndNxt = c.sndMax
	}
	l.output(c)
	if c.rtxAt == 0 {
		c.rtxAt = l.now + c.rto
	}
}

// keepTimer sends keep-alive probes on an idle established connection and
// aborts it after KeepCount unanswered probes (RFC 9293 3.8.4).
func (l *tcpLayer) keepTimer(c *tcpConn) {
	if l.cfg.KeepIdle == 0 || (c.state != tcpEstablished && c.state != tcpCloseWait) {
		return
	}
	if int(c.keepProbes) >= l.cfg.KeepCount {
		l.stats.KeepAborts++
		l.sendReset(c)
		l.closeConn(c)
		return
	}
	c.keepProbes++
	l.stats.KeepProbes++
	l.sendProbe(c)
	c.kaAt = l.now + int64(l.cfg.KeepInterval)
}

// armRTO starts the retransmission timer if it is not running (RFC 6298 5.1).
func (l *tcpLayer) armRTO(c *tcpConn) {
	if c.rtxAt == 0 || c.persist {
		c.persist = false
		l.rearmRTO(c)
	}
}

// rearmRTO (re)starts the retransmission timer: the tail loss probe
// timeout where it applies (RFC 8985 7.2: SACK, an RTT sample, not in
// recovery, no probe yet in this episode), else the RTO.
func (l *tcpLayer) rearmRTO(c *tcpConn) {
	c.tlp = false
	switch c.state {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpClosing, tcpLastAck:
		if c.sackOK && c.srtt > 0 && !c.tlpDone && c.recovery && (c.rtxUna || c.prrOn) && c.retries == 0 {
			// Recovery probe: SND.UNA's retransmission is out and the
			// ACKs have stopped. Either it or the ACK it drew was
			// lost, and nothing sent after it is left to tell (the
			// lost-retransmission check needs a later segment
			// SACKed). RFC 8985 sends no probe in recovery and leaves
			// this to the RTO, 200 ms or more against an RTT of a
			// few ms here; one retransmission after the probe
			// timeout repairs either loss, once per SND.UNA. In a PRR
			// recovery also before SND.UNA's segment went again: it
			// may be waiting for RACK, and the tail of a burst loss
			// leaves no ACK to clock it out. No allowance for a
			// delayed ACK: a retransmission that fills a hole is
			// ACKed at once (RFC 5681 §4.2).
			if pto := 2*c.srtt + tcpProbeSlack; pto < c.rto {
				c.tlp = true
				c.rtxAt = l.now + pto
				return
			}
		}
		if c.sackOK && c.srtt > 0 && !c.tlpDone && !c.recovery && c.retries == 0 {
			if pto := l.probeTimeout(c); pto < c.rto {
				c.tlp = true
				c.rtxAt = l.now + pto
				return
			}
		}
	}
	c.rtxAt = l.now + c.rto
}

// tcpProbeSlack is what the probe timeout adds to 2*SRTT with more than one
// segment in flight: Linux's TCP_TIMEOUT_MIN_US, room for the peer's and
// our own scheduling.
const tcpProbeSlack = int64(2 * time.Millisecond)

// probeTimeout is the PTO of RFC 8985 7.2 as Linux's tcp_schedule_loss_probe
// computes it: 2*SRTT, plus RTOMin when one segment is in flight (its ACK may
// be delayed: RFC 8985's WCDelAckT), else plus tcpProbeSlack. A floor of
// 10 ms stood here before: against the lab's 0.1-0.3 ms RTT it held every
// tail whose one ACK the path lost for 10 ms instead of 2.5.
func (l *tcpLayer) probeTimeout(c *tcpConn) int64 {
	if c.sndMax.diff(c.sndUna) <= uint32(c.mss) {
		return 2*c.srtt + int64(l.cfg.RTOMin)
	}
	return 2*c.srtt + tcpProbeSlack
}

// rtoAfterProbe re-arms the RTO after a probe. As Linux's tcp_rearm_rto does
// when the timer that fired was a probe, it runs from the last transmission
// of SND.UNA's segment, not from now: a probe that draws nothing does not
// push the RTO back by the probe timeout.
func (l *tcpLayer) rtoAfterProbe(c *tcpConn) {
	sent := l.now
	if recs := c.txRecs(); len(recs) > 0 && !c.sndUna.lt(recs[0].l) && c.sndUna.lt(recs[0].r) {
		sent = min(sent, recs[0].at)
	}
	c.rtxAt = max(sent+c.rto, l.now+1)
}

// sendLossProbe sends the tail loss probe (RFC 8985 7.3): new data if the
// windows allow, else the last segment again, so that a loss at the tail is
// repaired by the ACK or SACK it draws instead of an RTO.
//
// New data goes as two segments where there are two, not one as RFC 8985
// and Linux send. When the path lost the one ACK of a flight (a receiver
// that coalesces a burst answers it with one), the probe arrives in order,
// and one segment in order is what a receiver may hold its ACK for (RFC
// 5681 §4.2: at least every second full-sized segment; Linux waits 40 ms):
// on the lab's loss-1% path every such probe, Linux's too, drew its ACK
// 40-45 ms late. Two draw it at once. When the tail itself was lost, the
// probe leaves a hole and is SACKed at once either way.
func (l *tcpLayer) sendLossProbe(c *tcpConn) {
	c.tlp, c.tlpDone = false, true
	if c.recovery {
		l.stats.RecoveryProbes++
		l.retransmitAt(c, c.sndUna)
		c.rtxAt = l.now + c.rto // SND.UNA's segment went just now
		return
	}
	l.stats.TailLossProbes++
	bufs, dataEnd, fin := l.sendQueue(c)
	if c.sndNxt == c.sndMax && c.sndMax.lt(dataEnd) && c.sndMax.lt(c.sndUna.add(c.sndWnd)) {
		for i := 0; i < 2 && c.sndMax.lt(dataEnd) && c.sndMax.lt(c.sndUna.add(c.sndWnd)); i++ {
			n := min(uint32(c.mss), dataEnd.diff(c.sndMax), c.sndUna.add(c.sndWnd).diff(c.sndMax))
			if !l.emitAt(c, c.sndMax, n, bufs, dataEnd, fin) {
				break
			}
		}
	} else {
		end := dataEnd // the last byte of data, or the FIN
		if !(c.finSent && c.sndMax.gt(c.finSeq)) && end.gt(c.sndMax) {
			end = c.sndMax
		}
		seq := c.sndUna
		if end.diff(c.sndUna) > uint32(c.mss) {
			seq = end - seqnum(c.mss)
		}
		l.retransmitAt(c, seq)
	}
	c.tlp = false
	l.rtoAfterProbe(c)
}

// rttSample folds a measurement into SRTT/RTTVAR, RFC 6298 §2.
func (l *tcpLayer) rttSample(c *tcpConn, r int64) {
	if r <= 0 {
		r = 1
	}
	if c.srtt == 0 {
		c.srtt, c.rttvar = r, r/2
	} else {
		d := c.srtt - r
		if d < 0 {
			d = -d
		}
		c.rttvar = (3*c.rttvar + d) / 4
		c.srtt = (7*c.srtt + r) / 8
	}
	l.setRTO(c)
}

// setRTO sets the RTO from SRTT and RTTVAR, RFC 6298 §2.
func (l *tcpLayer) setRTO(c *tcpConn) {
	c.rto = c.srtt + max(4*c.rttvar, int64(1e6)) // G = 1 ms
	c.rto = max(c.rto, int64(l.cfg.RTOMin))
	c.rto = min(c.rto, int64(l.cfg.RTOMax))
}
