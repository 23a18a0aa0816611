package netstack

import (
	"reflect"
	"strings"
	"unicode"

	"percore/afxdp"
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
	if l := n.stack.tcp; l != nil {
		r.Add("tcp.rcv_bufs_used", uint64(l.rbufsMade-len(l.rbufs)))
	}
	h := n.srv.Stats()
	r.Add("http.requests", h.Requests)
	for i, v := range h.Responses {
		if i > 0 {
			r.Add("http.responses_"+string(rune('0'+i))+"xx", v)
		}
	}
	r.Add("http.bad_input", h.BadInput)
	r.Add("http.timeouts", h.Timeouts)
	r.Add("http.log_dropped", h.LogDropped)
	xs := afxdpStats{n.lastXsk}
	if !n.closed {
		xs.Stats, _ = n.sock.Stats()
	}
	addFields(r, "xsk.", xs.Stats)
	r.Add("native.drops", nativeDrops(&st, &ts, &xs))
}

type afxdpStats struct{ Stats afxdp.Stats }

// nativeDrops is the total of frames and segments dropped for any reason.
func nativeDrops(st *Stats, ts *TCPStats, xs *afxdpStats) uint64 {
	ip := st.EthTruncated + st.EthBadSrc + st.ARPTruncated + st.ARPUnsupported + st.ARPBadOp +
		st.ARPBadSender + st.IPv4Truncated + st.IPv4BadVersion + st.IPv4BadHeaderLen + st.IPv4BadTotalLen +
		st.IPv4BadChecksum + st.IPv4BadOptions + st.IPv4Fragments + st.IPv4BadSrc + st.ICMPTruncated +
		st.ICMPBadChecksum + st.PendingDropFull + st.PendingDropFail + st.TxNoFrame + st.TxNoRoute + st.TxTooBig
	tcp := ts.HeaderDrop + ts.ChecksumDrop + ts.OptionDrop + ts.NoConnDrop + ts.TableFull + ts.TxNoBuf +
		ts.PAWSDrop + ts.NoAckDrop + ts.OOODrop
	x := xs.Stats.RxDropped + xs.Stats.RxRingFull + xs.Stats.RxBadDesc + xs.Stats.TxBadDesc + xs.Stats.TxRingFull
	return ip + tcp + x
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
