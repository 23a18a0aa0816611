package netstack

// Loss detection by time, RACK (RFC 8985 §6); D-SACK (RFC 2883) received
// and generated; the undo of reductions that D-SACKs show were needless
// (RFC 3708). A segment is lost when a segment sent after it was delivered
// more than a reordering window ago, so reordering shorter than the window
// costs no retransmission, and a lost retransmission is found like any
// other loss.

// tcpTxRec is a range [l, r) of sequence space last sent at time at. The
// segments sent at one instant (one poll) share a record, so the ring
// holds one record per burst, not per segment.
type tcpTxRec struct {
	l, r seqnum
	at   int64
	rtx  bool // a retransmission: an ACK for it may be the original's
	// The TSval of the transmission this retransmission repeats (the
	// latest, if it repeats several), when the ring still knew it.
	prevOK bool
	prevTS uint32
}

// tcpTxRingBuf is what a connection with data in flight borrows from the
// layer: RACK's ring of records and the SACK scoreboard, the ranges the
// peer SACKed, sorted. A burst loss at a bottleneck leaves a hole every few
// segments; a scoreboard of a few ranges forgot the SACKs above them, and
// RACK then deemed lost what the peer held.
type tcpTxRingBuf struct {
	rec    [tcpTxRing]tcpTxRec
	sacked [tcpMaxSacked]tcpRange
}

// sackedRanges returns the scoreboard.
func (c *tcpConn) sackedRanges() []tcpRange {
	if c.tx == nil {
		return nil
	}
	return c.tx.sacked[:c.nsacked]
}

// txRecs returns c's records; nil when it holds no ring.
func (c *tcpConn) txRecs() []tcpTxRec {
	if c.tx == nil {
		return nil
	}
	return c.tx.rec[:c.ntx]
}

// txRing lends c a ring. The pool grows with the conns that have data in
// flight at once and is reused after, so steady state allocates nothing.
func (l *tcpLayer) txRing(c *tcpConn) {
	if n := len(l.txRings); n > 0 {
		c.tx = l.txRings[n-1]
		l.txRings = l.txRings[:n-1]
	} else {
		c.tx = new(tcpTxRingBuf)
		l.txMade++
	}
	c.ntx, c.nsacked = 0, 0
}

// freeTxRing takes c's ring back, forgetting its records.
func (l *tcpLayer) freeTxRing(c *tcpConn) {
	if c.tx != nil {
		l.txRings = append(l.txRings, c.tx)
		c.tx = nil
	}
	c.ntx, c.nsacked = 0, 0
}

// txStamp records that [lo, hi) was sent at at. Records of the same
// instant that touch merge; when the ring is full two neighbours merge
// (mergeClosest).
func (l *tcpLayer) txStamp(c *tcpConn, lo, hi seqnum, at int64, rtx bool) {
	if c.tx == nil {
		l.txRing(c)
	}
	n := int(c.ntx)
	if n == 0 || !lo.lt(c.tx.rec[n-1].r) {
		// New data, sent after everything recorded: the common case.
		if n > 0 && c.tx.rec[n-1].r == lo && c.tx.rec[n-1].at == at && c.tx.rec[n-1].rtx == rtx {
			c.tx.rec[n-1].r = hi
			return
		}
		if n == tcpTxRing {
			n = c.dropSacked(c.tx.rec[:n])
			if n == tcpTxRing {
				mergeClosest(c.tx.rec[:n])
				n--
			}
			c.ntx = uint8(n)
		}
		c.tx.rec[n] = tcpTxRec{l: lo, r: hi, at: at, rtx: rtx}
		c.ntx++
		return
	}
	// A retransmission inside the ring: cut [lo, hi) out of the records
	// it overlaps and insert it in order.
	var t [tcpTxRing + 2]tcpTxRec
	k := 0
	placed := false
	nr := tcpTxRec{l: lo, r: hi, at: at, rtx: rtx}
	for _, e := range c.tx.rec[:n] {
		if e.r.gt(lo) && e.l.lt(hi) {
			nr.prevTS, nr.prevOK = laterTS(nr.prevTS, nr.prevOK, c.tsAt(e.at)), true
		}
	}
	for _, e := range c.tx.rec[:n] {
		if e.l.lt(lo) {
			t[k] = e
			t[k].r = seqMin(e.r, lo)
			k++
		}
		if !placed && !e.r.lt(lo) {
			t[k] = nr
			k++
			placed = true
		}
		if e.r.gt(hi) {
			t[k] = e
			t[k].l = seqMax(e.l, hi)
			k++
		}
	}
	if !placed {
		t[k] = nr
		k++
	}
	if k > tcpTxRing {
		k = c.dropSacked(t[:k])
	}
	for k > tcpTxRing {
		mergeClosest(t[:k])
		k--
	}
	copy(c.tx.rec[:], t[:k])
	c.ntx = uint8(k)
}

// dropSacked makes room in a full ring: it removes the records whose bytes
// the peer has all SACKed, which RACK and the pipe have no more use for,
// and returns how many are left. A recovery cuts a record for each
// retransmission out of the ring; the SACKed ranges between them would
// otherwise fill it, and the merges that follow stamp bytes still in
// flight with a retransmission's later time.
func (c *tcpConn) dropSacked(recs []tcpTxRec) int {
	j := 0
	for _, e := range recs {
		if c.unsacked(e.l, e.r) > 0 {
			recs[j] = e
			j++
		}
	}
	return j
}

// mergeClosest makes room in a full ring: it merges the two neighbouring
// records of recs sent closest in time, under the later time, and moves
// the rest down one. Merging the newest record, ever extended with new
// data, would stamp bytes sent long ago as just sent: their delivery then
// made RACK deem lost everything sent in between (needless
// retransmissions, D-SACKed). Closest in time, the error is smallest.
func mergeClosest(recs []tcpTxRec) {
	best, gap := 0, int64(-1)
	for i := len(recs) - 2; i >= 0; i-- {
		if g := max(recs[i].at, recs[i+1].at) - min(recs[i].at, recs[i+1].at); gap < 0 || g < gap {
			best, gap = i, g
		}
	}
	a, b := &recs[best], recs[best+1]
	a.r, a.at, a.rtx = b.r, max(a.at, b.at), a.rtx || b.rtx
	if b.prevOK {
		a.prevTS, a.prevOK = laterTS(a.prevTS, a.prevOK, b.prevTS), true
	}
	copy(recs[best+1:], recs[best+2:])
}

// txPrune drops what the cumulative ACK una covers, and the ring with the
// last record.
func (l *tcpLayer) txPrune(c *tcpConn, una seqnum) {
	j := 0
	for _, e := range c.txRecs() {
		if e.r.leq(una) {
			continue
		}
		e.l = seqMax(e.l, una)
		c.tx.rec[j] = e
		j++
	}
	c.ntx = uint8(j)
	if j == 0 {
		l.freeTxRing(c)
	}
}

// rackDelivered updates RACK's most recently sent delivered segment from
// the delivered range [lo, hi), RFC 8985 §6.2 steps 1 and 2: "for each
// segment newly acknowledged", so not the parts the scoreboard holds
// already. A peer repeats its SACK blocks in ACK after ACK, and a record
// that merged them with a later retransmission (mergeClosest) would make
// their old delivery look like the retransmission's, and RACK deem lost
// all sent before it, the retransmissions still queued at a bottleneck
// among them.
//
// ecr is the ACK's echoed timestamp, 0 if none: an echo older than a
// retransmission's TSval says the ACK answers an earlier transmission.
//
// rtt ends at now, the Poll that read the ACK, as every RTT sample does
// (rttSample, HyStart++): the sender acts on an ACK only then, and the
// round trip that sizes its window and its timers includes that wait.
// Step 2's question is another: which transmission did the ACK answer?
// That takes the ACK's arrival (rxAt): an ACK that waited in the link
// while the shard was busy would otherwise pass for the
// retransmission's, however soon after it the ACK came. min_RTT, from
// Poll times, is no less than the path's: an ACK that came sooner after
// the retransmission answers the original.
//
// RACK.rtt is the RTT of the last segment delivered (step 2 sets it for
// each, as Linux's tcp_rack_advance does), not that of RACK's segment.
// The min_RTT test cannot tell an original's ACK from its
// retransmission's when the ACK comes min_RTT or more after the
// retransmission while the path's round trip is far above min_RTT (a
// queue, a peer or bridge not scheduled for a while): RACK then takes
// the retransmission for delivered. With the retransmission's short RTT
// as RACK.rtt, all sent before it was lost at once, on the lab's reorder
// path without timestamps whole bursts still in flight
// (TestTCPRACKRetransmitAmbiguous). With the RTT of the last segment
// delivered, the ACK deems lost only segments sent a reordering window or
// more before that one.
func (l *tcpLayer) rackDelivered(c *tcpConn, lo, hi seqnum, ecr uint32, f *TCPFields) {
	for _, e := range c.txRecs() {
		if !e.r.gt(lo) || !e.l.lt(hi) || c.unsacked(seqMax(e.l, lo), seqMin(e.r, hi)) == 0 {
			continue
		}
		rtt := l.now - e.at
		if e.rtx && (l.rxAt-e.at < c.minRTT || ecr != 0 && (int32(ecr-c.tsAt(e.at)) < 0 || e.prevOK && int32(ecr-e.prevTS) <= 0)) {
			// Step 2: "the ACK is likely for the original transmission
			// ... ignore this segment". Taken for the retransmission's,
			// it would make RACK deem lost all sent before it. The
			// timestamp clock ticks in ms, and a retransmission often
			// leaves within the tick of the transmission it repeats: an
			// echo no newer than that one's TSval may answer either, so
			// the ACK counts as the earlier one's. Without timestamps
			// only the min_RTT test tells, on the ACK's arrival.
			continue
		}
		if e.rtx && ecr == 0 && c.nothingAheadDelivered(e.at, hi, f) {
			// Without an echo, the same step's ambiguity told by
			// the order of the path: had the retransmission
			// arrived, the originals sent shortly before it above
			// it would have come first, and some would be SACKed.
			// None is: the ACK answers the original, which came
			// late (an ACK held back on its way, a segment the path
			// held back).
			continue
		}
		end := seqMin(e.r, hi)
		c.rackRTT = rtt
		if e.at > c.rackXmit || (e.at == c.rackXmit && end.gt(c.rackEnd)) || !c.rackOn {
			c.rackOn, c.rackXmit, c.rackEnd = true, e.at, end
		}
		if !e.rtx && rtt > 0 && (c.minRTT == 0 || rtt < c.minRTT) {
			c.minRTT = rtt
		}
		if !e.rtx {
			c.hystartSample(rtt)
		}
	}
}

// nothingAheadDelivered reports whether originals sent within SRTT before
// at lie above hi, DupThresh segments or more, and none of their bytes is
// SACKed, by the scoreboard or by the ACK in f (not in the scoreboard
// yet). Fewer, or older ones (those a timeout deemed lost), may all have
// been lost.
func (c *tcpConn) nothingAheadDelivered(at int64, hi seqnum, f *TCPFields) bool {
	ahead := uint32(0)
	for _, e := range c.txRecs() {
		if e.rtx || e.at >= at || e.at < at-c.srtt || !e.r.gt(hi) {
			continue
		}
		lo := seqMax(e.l, hi)
		if c.unsacked(lo, e.r) < e.r.diff(lo) {
			return false
		}
		for i := 0; i < f.NSACK; i++ {
			if seqnum(f.SACK[i].Left).lt(e.r) && lo.lt(seqnum(f.SACK[i].Right)) {
				return false
			}
		}
		ahead += e.r.diff(lo)
	}
	return ahead >= 3*uint32(c.mss)
}

// tsAt is the TSval c sent, or would send, at time at (tsNow).
func (c *tcpConn) tsAt(at int64) uint32 { return uint32(at/1e6) + c.tsOff }

// laterTS returns the later of two TSvals, a known one over an unknown.
func laterTS(a uint32, aOK bool, b uint32) uint32 {
	if aOK && int32(a-b) > 0 {
		return a
	}
	return b
}

// rackAck feeds the ACK in f to RACK: the bytes it acknowledges
// cumulatively and the SACK blocks within the window. It runs before the
// scoreboard and the ring are pruned.
func (l *tcpLayer) rackAck(c *tcpConn, f *TCPFields, ack seqnum) {
	c.rackHold = false // the batch's last ACK decides (partialUndo)
	if !c.rackOn {
		c.rackFack = c.sndUna
	}
	ecr := uint32(0)
	if c.tsOK && f.HasTimestamp {
		ecr = f.TSEcr
	}
	if ack.gt(c.sndUna) {
		c.checkReordered(c.sndUna, ack)
		l.rackDelivered(c, c.sndUna, ack, ecr, f)
		c.rackFack = seqMax(c.rackFack, ack)
	}
	for i := 0; i < f.NSACK; i++ {
		r := tcpRange{seqnum(f.SACK[i].Left), seqnum(f.SACK[i].Right)}
		if r.l.lt(r.r) && r.l.gt(ack) && r.r.leq(c.sndMax) {
			c.checkReordered(r.l, r.r)
			l.rackDelivered(c, r.l, r.r, ecr, f)
		}
	}
	for i := 0; i < f.NSACK; i++ {
		r := tcpRange{seqnum(f.SACK[i].Left), seqnum(f.SACK[i].Right)}
		if r.l.lt(r.r) && r.l.gt(ack) && r.r.leq(c.sndMax) {
			c.rackFack = seqMax(c.rackFack, r.r)
		}
	}
}

// checkReordered sets RACK.reordering_seen (RFC 8985 §6.2 step 2) when
// [lo, hi), just delivered, holds bytes below the highest delivered
// (RACK.fack) that were sent once and not SACKed before: they arrived
// after data sent later.
func (c *tcpConn) checkReordered(lo, hi seqnum) {
	hi = seqMin(hi, c.rackFack)
	for _, e := range c.txRecs() {
		if c.reordSeen || e.rtx || !e.r.gt(lo) || !e.l.lt(hi) {
			continue
		}
		if c.sackedAbove(seqMax(e.l, lo)).lt(seqMin(e.r, hi)) {
			c.reordSeen = true
		}
	}
}

// reoWnd is RACK.reo_wnd, RFC 8985 §6.2 step 4: "min(RACK.reo_wnd_mult *
// RACK.min_RTT / 4, SRTT)", the multiplier grown by D-SACKs.
// With no reordering seen, in recovery, once DupThresh segments are
// SACKed or after a tail loss probe (whose SACK is the loss signal, RFC
// 8985 7.4) it is zero: loss is then told as fast as by duplicate ACKs.
func (l *tcpLayer) reoWnd(c *tcpConn) int64 {
	if !c.reordSeen && (c.recovery || c.tlpDone || l.sackedBytes(c) >= 3*uint32(c.mss)) {
		return 0
	}
	return min(int64(max(c.reoMult, 1))*c.minRTT/4, c.srtt)
}

// rackLost returns the lowest unSACKed byte that RACK deems lost, RFC 8985
// §6.2 step 5: sent before RACK's segment and "RACK.rtt + RACK.reo_wnd"
// ago or more. It arms the reorder timer for the segments that are not
// lost yet but will be if nothing is heard of them (§6.3: "the
// maximum remaining time").
func (l *tcpLayer) rackLost(c *tcpConn) (seqnum, bool) {
	c.rackAt = 0
	if !c.rackOn || c.minRTT == 0 || c.sndUna == c.sndMax {
		return 0, false
	}
	reo := l.reoWnd(c)
	var lost seqnum
	found := false
	wait := int64(0)
	for _, e := range c.txRecs() {
		hi := e.r
		switch {
		case e.at > c.rackXmit:
			continue // sent after RACK's segment
		case e.at == c.rackXmit:
			hi = seqMin(hi, c.rackEnd) // the same instant: the segments below it
		}
		seq := c.sackedAbove(seqMax(e.l, c.sndUna))
		if !seq.lt(hi) {
			continue
		}
		if rem := e.at + c.rackRTT + reo - l.now; rem > 0 {
			wait = max(wait, rem)
			continue
		}
		if !found {
			lost, found = seq, true
		}
	}
	if wait > 0 {
		c.rackAt = l.now + wait
	}
	return lost, found
}

// sackedAbove returns seq moved past the SACKed ranges it falls in.
func (c *tcpConn) sackedAbove(seq seqnum) seqnum {
	for _, r := range c.sackedRanges() {
		if seq.geq(r.l) && seq.lt(r.r) {
			seq = r.r
		}
	}
	return seq
}

// rackCheck runs RACK after an ACK that told something new (delivered:
// the bytes it newly acknowledged or SACKed), and at the reorder timeout:
// a loss it finds starts recovery if none is running (without waiting for
// three duplicate ACKs), and PRR (tcp_prr.go) sends the lost segments
// again and new data as the ACKs of the recovery clock them out.
func (l *tcpLayer) rackCheck(c *tcpConn, delivered uint32) {
	if !c.sackOK {
		return
	}
	switch c.state {
	case tcpEstablished, tcpCloseWait, tcpFinWait1, tcpClosing, tcpLastAck:
	default:
		c.rackAt = 0
		return
	}
	seq, lost := l.rackLost(c)
	if c.recovery && c.prrOn {
		l.prrAck(c, delivered)
		return
	}
	if !lost {
		return
	}
	if !c.recovery {
		if c.frto {
			return // F-RTO waits for the next ACK to judge the timeout (ackUndo)
		}
		if c.retries > 0 || c.sndUna.lt(c.recover) {
			// After an RTO, go-back-N resends what is lost; what it
			// resent already (below SND.NXT) and RACK deems lost
			// again goes now, as Linux's RACK does in its Loss
			// state. Left to the RTO, backed off while go-back-N
			// takes no RTT sample, each such loss cost twice the
			// last timeout.
			l.rackRetransmit(c, c.sndNxt)
			return
		}
		l.stats.RACKRecoveries++
		l.enterRecovery(c)
		if c.prrOn {
			l.prrAck(c, delivered)
			return
		}
		if seq == c.sndUna {
			l.stats.RACKLost++
		}
	}
	l.rackRetransmit(c, c.sndMax)
}

// rackRetransmit sends again up to two segments below limit that RACK
// deems lost, and arms the reorder timer for what is left.
func (l *tcpLayer) rackRetransmit(c *tcpConn, limit seqnum) {
	for i := 0; i < 2; i++ {
		seq, lost := l.rackLost(c)
		if !lost || !seq.lt(limit) {
			return
		}
		l.stats.RACKLost++
		l.retransmitAt(c, seq)
		c.rtxHigh = seqMax(c.rtxHigh, seq.add(uint32(c.mss)))
	}
	l.rackLost(c) // the timer for what is left
}

// tcpRackDue is a connection that took ACKs in this batch of frames, with
// SND.UNA and the bytes SACKed before the first of them.
type tcpRackDue struct {
	h      TCPHandle
	una    seqnum
	sacked uint32
}

// rackLater leaves RACK's verdict on c's ACKs to the end of the batch of
// frames (rackBatch), which then judges them all at once. A batch often
// holds, after an ACK that SACKs a segment sent later, the ACK of one the
// path merely reordered; judged ACK by ACK, RACK deemed the reordered one
// lost between the two (when its burst went out a reordering window or
// more before the next), and recovery resent it and what RACK deemed lost
// with it, all D-SACKed. una and sacked are SND.UNA and the bytes SACKed
// before this ACK.
func (l *tcpLayer) rackLater(c *tcpConn, una seqnum, sacked uint32) {
	if c.rackDue || c.sndUna == c.sndMax {
		return // queued already, or nothing in flight to judge
	}
	c.rackDue = true
	l.rackDue = append(l.rackDue, tcpRackDue{TCPHandle{id: c.id, gen: c.gen}, una, sacked})
}

// rackBatch runs RACK for each connection that took ACKs in the batch,
// with the bytes all of them delivered (PRR's clock), and in a recovery
// sends the new data PRR then allows (RACK sent the lost segments).
func (l *tcpLayer) rackBatch() {
	for _, d := range l.rackDue {
		c := l.conns[d.h.id]
		if c.gen != d.h.gen || !c.rackDue {
			continue // closed, and maybe reused, since
		}
		c.rackDue = false
		if c.state == tcpClosed {
			continue
		}
		l.rackCheck(c, uint32(max(int64(c.sndUna.diff(d.una))+int64(l.sackedBytes(c))-int64(d.sacked), 0)))
		c.rackHold = false
		if c.prrOn {
			l.output(c)
		}
		l.schedule(c)
	}
	clear(l.rackDue)
	l.rackDue = l.rackDue[:0]
}

// reorderTimeout is RACK's reorder timer, RFC 8985 §6.3.
func (l *tcpLayer) reorderTimeout(c *tcpConn) {
	l.stats.ReorderTimeouts++
	l.rackCheck(c, 0)
}

// isDSACK reports whether SACK block r, the first of f's, is a D-SACK
// (RFC 2883 §4): below the cumulative ACK, or inside the second block.
func isDSACK(f *TCPFields, r tcpRange) bool {
	if r.r.leq(seqnum(f.Ack)) {
		return true
	}
	if f.NSACK < 2 {
		return false
	}
	s := tcpRange{seqnum(f.SACK[1].Left), seqnum(f.SACK[1].Right)}
	return r.l.geq(s.l) && r.r.leq(s.r)
}

// dsackArrived takes a D-SACK for r: data the peer got twice.
func (l *tcpLayer) dsackArrived(c *tcpConn, r tcpRange) {
	l.stats.DSACKsIn++
	if c.undoRtx == 0 || r.l.lt(c.undoMarker) {
		// Not a retransmission of the last episode: the network
		// duplicated the segment, which says nothing of reordering.
		return
	}
	// RFC 8985 §6.2 step 3: reordering made a retransmission needless;
	// widen the window by min_RTT/4, at most once per round trip. An
	// episode undone already (Eifel, partialUndo) counts too: its
	// retransmissions were as needless.
	c.reordSeen = true
	if c.reoMult == 0 || c.sndUna.geq(c.dsackRound) {
		c.reoMult = min(max(c.reoMult, 1)+1, 255)
		c.dsackRound = c.sndMax
		c.reoPersist = tcpReoPersist
	}
	// RFC 3708 §3: when every retransmission of the episode is reported
	// duplicate, the reduction was needless.
	mss := uint32(c.mss)
	c.undoRtx -= min((r.r.diff(r.l)+mss-1)/mss, c.undoRtx)
	if c.undoRtx == 0 && c.undoOn {
		// The reordering that made the episode needless is the
		// path's: the wider window persists one recovery more (Linux's
		// tcp_try_undo_dsack).
		c.reoPersist = min(c.reoPersist+1, tcpReoPersist)
		l.undo(c)
	}
}

// tcpReoPersist is RACK.reo_wnd_persist (RFC 8985 §6.2 step 4): after
// this many recoveries without a D-SACK the reordering window goes back
// to min_RTT/4.
const tcpReoPersist = 16

// recoveryDone ends a recovery that was not undone, one that repaired
// real losses: the widened window persists for tcpReoPersist of them
// (Linux's tcp_try_undo_recovery). Needless recoveries do not wear it
// down, or a path that reorders much would lose its window to the
// recoveries its reordering causes.
func (c *tcpConn) recoveryDone() {
	if c.reoPersist > 0 {
		c.reoPersist--
		if c.reoPersist == 0 {
			c.reoMult = 1
		}
	}
}

// eifel undoes a reduction when the ACK that ends its recovery, or the
// first after its timeout, echoes a timestamp older than the episode's
// first retransmission: the original segments got there (RFC 3522, as
// Linux's tcp_packet_delayed).
func (l *tcpLayer) eifel(c *tcpConn, f *TCPFields) bool {
	if c.undoOn && c.echoPredatesRtx(f) {
		l.stats.EifelUndos += uint64(c.undoEpisodes)
		l.undo(c)
		return true
	}
	return false
}

// ackUndo tries the undos an ACK that advanced SND.UNA allows, after
// newAck: inRecovery, afterRTO and nxt (SND.NXT) tell where the
// connection stood before it. A recovery that ended is undone by Eifel or
// counted as one that repaired real losses; one that goes on may be
// undone in part. After a timeout, Eifel tells a spurious one by its
// timestamps, F-RTO without them.
func (l *tcpLayer) ackUndo(c *tcpConn, f *TCPFields, inRecovery, afterRTO bool, nxt seqnum) {
	switch {
	case inRecovery && c.recovery:
		l.partialUndo(c, f)
	case inRecovery:
		if !l.eifel(c, f) {
			c.recoveryDone()
		}
	case afterRTO:
		c.frto = false
		if !l.eifel(c, f) && !c.tsOK {
			l.frtoStart(c, nxt)
		}
	case c.frto:
		// F-RTO step 3b: an ACK of data sent once, never resent after
		// the timeout: the originals were only delayed. The undo ends
		// the go-back-N too.
		c.frto, c.sndNxt = false, c.frtoNxt
		l.stats.FRTOUndos += uint64(c.undoEpisodes)
		l.undo(c)
	}
}

// frtoStart is F-RTO's step 2 (RFC 5682 §2.1), on the first ACK after a
// timeout, which advanced SND.UNA to or past nxt (what go-back-N had
// resent) but not to recover: rather than resend more, it sends up to
// two new segments. If the next ACK acknowledges data sent before the
// timeout, none of it was lost and the timeout was spurious (ackUndo);
// a duplicate ACK says it was real, and go-back-N resumes (frtoDupAck). A
// peer with timestamps has Eifel (RFC 3522) instead.
func (l *tcpLayer) frtoStart(c *tcpConn, nxt seqnum) {
	_, dataEnd, _ := l.sendQueue(c)
	if !c.undoOn || c.sndUna.lt(nxt) || !c.sndUna.lt(c.recover) || !c.sndMax.lt(dataEnd) {
		return // step 2a, or no new data to send: conventional recovery
	}
	c.frtoNxt = c.sndNxt
	for i := 0; i < 2 && c.sndMax.lt(dataEnd) && c.sndMax.add(uint32(c.mss)).leq(c.sndUna.add(c.sndWnd)); i++ {
		l.retransmitAt(c, c.sndMax) // new data at SND.MAX, past cwnd as step 2b allows
	}
	if c.sndMax == c.frtoNxt {
		return
	}
	c.frto = true
	c.sndNxt = c.sndMax // nothing more until the next ACK
}

// frtoDupAck is F-RTO's step 3 on a duplicate ACK after the new data. If
// it SACKs data below recover, sent once before the timeout and not
// resent since (the timeout cleared the scoreboard), the originals got
// there and the timeout was spurious (the SACK-enhanced step 3b, RFC 5682
// §3.1, as Linux's FLAG_ORIG_SACK_ACKED); otherwise it was real (step
// 3a), and go-back-N resumes where it stood.
func (l *tcpLayer) frtoDupAck(c *tcpConn) {
	if !c.frto {
		return
	}
	c.frto = false
	if s := c.sackedRanges(); len(s) > 0 && s[0].l.lt(c.recover) {
		c.sndNxt = c.frtoNxt
		l.stats.FRTOUndos += uint64(c.undoEpisodes)
		l.undo(c)
		return
	}
	c.sndNxt = seqMax(c.frtoNxt, c.sndUna)
}

// partialUndo is Linux's tcp_try_undo_partial, for an ACK that advanced
// SND.UNA in a recovery but not to its end. If the ACK answers the
// original segments (packetDelayed), the hole was filled by a segment the
// path only held back: the path reorders more than RACK's window allowed
// for. While retransmissions are still out, this ACK deems nothing more
// lost (rackHold; PRR still clocks out new data): each would be one more
// needless retransmission. With none out, the reduction is undone and
// the recovery ends. Only recoveries that RACK and PRR run: NewReno's has
// resent SND.UNA's segment already.
func (l *tcpLayer) partialUndo(c *tcpConn, f *TCPFields) {
	if !c.prrOn || !c.undoOn || !c.packetDelayed(f) {
		return
	}
	c.reordSeen = true
	if c.rtxOut() {
		c.rackHold = true
		return
	}
	l.stats.PartialUndos += uint64(c.undoEpisodes)
	l.undo(c)
}

// packetDelayed reports whether the ACK in f answers original segments
// rather than the episode's retransmissions: none was sent yet (undoRtx
// counts those not D-SACKed, and all D-SACKed ends the episode), or the
// ACK echoes a timestamp from before the first (Linux's
// tcp_packet_delayed).
func (c *tcpConn) packetDelayed(f *TCPFields) bool {
	return c.undoRtx == 0 || c.echoPredatesRtx(f)
}

// echoPredatesRtx reports whether the ACK in f echoes a timestamp from
// before the episode's first retransmission (undoTS is kept only on
// connections with timestamps).
func (c *tcpConn) echoPredatesRtx(f *TCPFields) bool {
	return c.undoTSOn && f.HasTimestamp && f.TSEcr != 0 && int32(f.TSEcr-c.undoTS) < 0
}

// rtxOut reports whether a retransmission is still in flight: a range
// last sent as one that the peer has neither acknowledged nor SACKed
// (Linux's retrans_out).
func (c *tcpConn) rtxOut() bool {
	for _, e := range c.txRecs() {
		if e.rtx && e.r.gt(c.sndUna) && c.unsacked(seqMax(e.l, c.sndUna), e.r) > 0 {
			return true
		}
	}
	return false
}

// saveUndo remembers the window before a reduction (RFC 3708 §3.1,
// Linux's prior_cwnd and prior_ssthresh). While the last reduction is
// still undecided, less than an RTO after it began, the D-SACKs for its
// retransmissions may yet come (reordering delays them past the next
// loss): the new reduction joins it, and one undo, to the window before
// the first, needs every retransmission of both D-SACKed. Linux starts
// afresh, and a reduction reordering caused then stays.
func (l *tcpLayer) saveUndo(c *tcpConn) {
	l.stats.Reductions++
	if c.undoOn && c.undoRtx > 0 && l.now-c.undoAt < c.rto && c.undoEpisodes < 255 {
		c.undoEpisodes++
		return
	}
	c.undoOn, c.undoRtx, c.undoMarker, c.undoTSOn = true, 0, c.sndUna, false
	c.undoAt, c.undoEpisodes = l.now, 1
	c.undoCwnd, c.undoSsthresh, c.undoCubic = c.cwnd, c.ssthresh, c.cubic
}

// undo restores the window of before the reduction (RFC 3708 §3.2). A
// recovery still running ends, and the go-back-N of a timeout stops
// where it is: what they repaired was never lost, and sending resumes
// with new data (RFC 4015 §3.2, "SND.NXT <- SND.MAX"; Linux clears the
// lost marks).
func (l *tcpLayer) undo(c *tcpConn) {
	l.stats.SpuriousUndos += uint64(c.undoEpisodes)
	c.undoOn = false
	c.cwnd = max(c.cwnd, c.undoCwnd)
	c.ssthresh = max(c.ssthresh, c.undoSsthresh)
	c.cubic = c.undoCubic
	if c.undoSsthresh > c.undoCwnd {
		// The reduction cut a slow start short, which resumes, and
		// HyStart++ with it (as in Linux's CUBIC, which a loss does not
		// end): left ended, the window would grow unchecked until a
		// real loss stopped it.
		c.hystart = hystartState{}
	}
	if c.recovery || c.sndNxt.lt(c.sndMax) {
		c.recovery, c.dupAcks, c.prrOn = false, 0, false
		c.recover = c.sndUna // a new loss may start a recovery at once
	}
	c.sndNxt = c.sndMax
}

// noteDSACK records duplicate data [lo, hi) for a D-SACK block in the
// next segment (RFC 2883 §4: the first block). One block is held: one
// pending that the new range does not touch goes out in an ACK first, as
// the sender counts them to undo (RFC 3708).
func (l *tcpLayer) noteDSACK(c *tcpConn, lo, hi seqnum) {
	if !c.sackOK || !lo.lt(hi) {
		return
	}
	if c.dsackOn {
		if !c.dsack.r.lt(lo) && !hi.lt(c.dsack.l) {
			c.dsack = tcpRange{seqMin(lo, c.dsack.l), seqMax(hi, c.dsack.r)}
			return
		}
		l.sendAck(c)
	}
	c.dsack, c.dsackOn = tcpRange{lo, hi}, true
}

// rackActive reports whether RACK tells losses, in place of the duplicate
// ACK threshold (as Linux does with RACK): SACK and an RTT measured.
func (c *tcpConn) rackActive() bool { return c.sackOK && c.minRTT > 0 }
