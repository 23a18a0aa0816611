package server

import (
	"reflect"
	"strings"
	"unicode"

	"percore/afxdp"
	"percore/netstack"
	"percore/shard"
)

// Report implements shard.Reporter: the glue's, the stack's, TCP's, httpd's
// and the socket's counters, each under its prefix (native., ip., tcp.,
// http., xsk.). Runs on the shard's goroutine at report time (may allocate).
// native.drops sums every counter that names a dropped frame or segment, for
// the one-line stats.
func (n *Native) Report(r *shard.Report) {
	r.Add("native.open", uint64(n.open))
	addFields(r, "native.", n.stats)
	st := n.stack.Stats()
	addFields(r, "ip.", st)
	r.Add("ip.arp_pending", uint64(n.stack.Pending()))
	r.Add("ip.held_tx", uint64(n.stack.HeldTx()))
	ts := n.stack.TCPStats()
	addFields(r, "tcp.", ts)
	addHTTP(r, n.srv.Stats())
	xs := afxdpStats{n.lastXsk}
	if !n.closed {
		xs.Stats, _ = n.sock.Stats()
	}
	addFields(r, "xsk.", xs.Stats)
	r.Add("native.drops", nativeDrops(&st, &ts, &xs))
}

type afxdpStats struct{ Stats afxdp.Stats }

// nativeDrops is the total of frames and segments dropped for any reason:
// the counters dropCounters marks true, walked by name at report time.
func nativeDrops(st *netstack.Stats, ts *netstack.TCPStats, xs *afxdpStats) uint64 {
	return sumDrops(*st) + sumDrops(*ts) + sumDrops(xs.Stats)
}

// dropCounters sorts every integer field of the counter structs native.drops
// sums (Stats, TCPStats, afxdp.Stats): true for a dropped frame or segment
// (or one discarded unanswered), false for an event, an outcome that is not a
// loss, a byte count or a gauge. A field missing here fails
// TestNativeDropsCoverEveryCounter, so a new counter cannot be forgotten.
var dropCounters = map[string]bool{
	// Stats: malformed or unusable frames, and frames we could not send.
	"EthTruncated": true, "EthBadSrc": true, "ARPTruncated": true, "ARPUnsupported": true,
	"ARPBadOp": true, "ARPBadSender": true, "IPv4Truncated": true, "IPv4BadVersion": true,
	"IPv4BadHeaderLen": true, "IPv4BadTotalLen": true, "IPv4BadChecksum": true,
	"IPv4BadOptions": true, "IPv4Fragments": true, "IPv4BadSrc": true, "ICMPTruncated": true,
	"ICMPBadChecksum": true, "ICMPEchoTooBig": true, "PendingDropFull": true, "PendingDropFail": true,
	"TxNoFrame": true, "TxNoRoute": true, "TxTooBig": true,
	"RxFrames": false, "TxFrames": false, "Polls": false, "EthNotForUs": false, "EthUnknownType": false,
	"ARPConflict": false, "ARPNotForUs": false, "ARPRequestsRx": false, "ARPRepliesRx": false,
	"ARPRepliesTx": false, "ARPRequestsTx": false, "ARPResolveFailed": false, "ARPEvictions": false,
	"IPv4Broadcast": false, "IPv4WrongDst": false, "IPv4LinkBcast": false, "IPv4UnknownProto": false,
	"IPv4TCP": false, "NoTCP": false, "IPv4Options": false, "ICMPEchoRequests": false,
	"ICMPOther": false, "ICMPEchoReplies": false,

	// TCPStats: the *Drop counters, a full table, no tx buffer, and
	// unacceptable segments whose answer the rate limits suppressed.
	"HeaderDrop": true, "ChecksumDrop": true, "OptionDrop": true, "NoConnDrop": true,
	"TableFull": true, "TxNoBuf": true, "PAWSDrop": true, "NoAckDrop": true, "OOODrop": true,
	"AfterFinDrop": true, "OOWAckLimit": true, "ChallengeLimit": true,
	"InSegs": false, "OutSegs": false, "Retransmits": false, "NoPortRST": false,
	"PassiveOpens": false, "ActiveOpens": false, "AcceptRefused": false, "SynCookiesSent": false,
	"SynCookiesOK": false, "SynCookiesBad": false, "SynRcvdTimeout": false, "SynSentTimeout": false,
	"OutOfWindow": false, "ChallengeACKs": false, "AckTooNew": false, "AckTooOld": false,
	"ResetsIn": false, "ResetsOut": false, "DisorderedAcks": false, "OOOSegs": false,
	"RcvBufEmpty": false, "DupSegs": false, "RTOTimeouts": false, "RTOAborts": false,
	"FastRetransmits": false, "LostRetransmits": false, "TailLossProbes": false,
	"RecoveryProbes": false, "SACKSkipped": false, "PersistProbes": false, "KeepProbes": false,
	"KeepAborts": false, "FinWait2Timeout": false, "DelayedAcks": false, "AppTimeouts": false,
	"TimeWaitDone": false, "TimeWaitRecycled": false, "Conns": false, "SynRcvd": false,
	"TimeWaits": false, "RcvBufsUsed": false,

	// afxdp.Stats: frames the kernel or the socket dropped.
	"RxDropped": true, "RxRingFull": true, "RxInvalidDescs": true, "TxInvalidDescs": true,
	"RxBadDesc": true, "TxBadDesc": true, "TxRingFull": true, "FillBadAddr": true, "FreeBad": true,
	"RxFillRingEmpty": false, "TxRingEmpty": false, "RxBatches": false, "TxBatches": false,
	"Completed": false, "Kicks": false, "KickBusy": false, "KickErrors": false, "RxWakeups": false,
	"FreeFrames": false, "FillQueued": false, "RxQueued": false, "TxOutstanding": false,
}

// sumDrops sums the uint64 fields of the struct v that dropCounters marks.
func sumDrops(v any) uint64 {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	var n uint64
	for i := 0; i < rt.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Uint64 && dropCounters[rt.Field(i).Name] {
			n += f.Uint()
		}
	}
	return n
}

// addFields adds every integer field of the struct v as a counter named
// prefix + the field name in snake case (RxFrames -> rx_frames).
func addFields(r *shard.Report, prefix string, v any) {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rv.Field(i)
		var u uint64
		switch f.Kind() {
		case reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8, reflect.Uint:
			u = f.Uint()
		case reflect.Int, reflect.Int64, reflect.Int32:
			if f.Int() < 0 {
				continue
			}
			u = uint64(f.Int())
		default:
			continue
		}
		r.Add(prefix+snake(rt.Field(i).Name), u)
	}
}

// snake turns a Go field name into snake case, keeping acronyms together:
// IPv4BadChecksum -> ipv4_bad_checksum, RxRingFull -> rx_ring_full.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(strings.NewReplacer("IPv4", "Ipv4", "ACKs", "Acks").Replace(s))
	for i, c := range rs {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (nextLower && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
