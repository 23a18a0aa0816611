// Package afxdp gives a shard batched, allocation-free access to one NIC queue
// through an AF_XDP socket: the UMEM, its fill/completion/rx/tx rings, and the XDP
// program and XSKMAP that steer percore's frames to the socket. It must not know
// about IP or TCP beyond the steering rules of the XDP program.
package afxdp
