// Package netstack is percore's userspace TCP/IP stack: wire views (Ethernet,
// ARP, IPv4, ICMP, TCP) and the per-shard Stack that a shard drives over a
// batched Link (an AF_XDP socket's AFXDPLink, or ChanLink and FaultLink in
// tests). It defines the contracts an application implements: TCPApp (and
// TCPAppTimer) per connection, TCPEndpoint per listener, with TCPHandle,
// WakeTCP, AbortTCP and UnlistenTCP to act on them outside a segment.
//
// It must not read a clock or start goroutines: time is an argument, and Poll
// returns when it wants to be called again. It imports no percore package but
// afxdp: HTTP, the shard loop and start-up live above it (server, native).
package netstack
