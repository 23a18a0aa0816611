package server

import (
	"percore/httpd"
	"percore/shard"
)

// Report implements shard.Reporter: the glue's, the stack's, TCP's, httpd's
// and the socket's counters, each under its prefix (native., ip., tcp.,
// http., xsk.), each of the kind its struct declares. Runs on the shard's
// goroutine at report time (may allocate).
func (n *Native) Report(r *shard.Report) {
	r.AddKind("native.open", shard.Gauge, uint64(n.open))
	r.AddFields("native.", n.stats)
	r.AddFields("native.", n.q.Stats())
	r.AddFields("ip.", n.stack.Stats())
	r.AddKind("ip.arp_pending", shard.Gauge, uint64(n.stack.Pending()))
	r.AddKind("ip.held_tx", shard.Gauge, uint64(n.stack.HeldTx()))
	r.AddFields("tcp.", n.stack.TCPStats())
	addHTTP(r, n.srv.Stats())
	r.AddFields("xsk.", n.q.XSKStats())
	if n.mem != nil {
		r.AddFields("mem.", n.mem.Stats())
	}
	if n.tls != nil {
		r.AddFields("tls.", n.tls.report())
	}
}

// addHTTP adds a shard's HTTP counters to its report, the same names on
// either stack.
func addHTTP(r *shard.Report, h httpd.Stats) {
	r.AddFields("http.", h)
	for i, n := range h.Responses {
		if i > 0 {
			r.Add("http.responses_"+string(rune('0'+i))+"xx", n)
		}
	}
}

// Report implements shard.Reporter: the counters of every queue's Native
// summed by name, so the shard reports each name once, as with one queue.
func (ns *NativeShard) Report(r *shard.Report) {
	parts := make([]shard.Report, len(ns.natives))
	for i, n := range ns.natives {
		n.Report(&parts[i])
	}
	r.Counters = append(r.Counters, shard.Merge(parts).Counters...)
}
