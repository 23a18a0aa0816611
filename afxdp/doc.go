// Package afxdp gives a shard batched, allocation-free access to one NIC queue
// through an AF_XDP socket: the UMEM, its fill/completion/rx/tx rings, and the XDP
// program and XSKMAP that steer percore's frames to the socket. It must not know
// about IP or TCP beyond the steering rules of the XDP program.
//
// Setup, once per interface and once per queue, on a thread in the
// interface's network namespace (see lab.NS.Enter):
//
//	p, _ := afxdp.NewProgram(afxdp.ProgramConfig{IP: ip, Ports: []uint16{80}})
//	p.Attach("eth0", afxdp.Native)           // bpf_link: gone when the process dies
//	s, _ := afxdp.Open(afxdp.Config{Interface: "eth0", Queue: q})
//	p.Register(s)                             // XSKMAP[q] = s
//
// The shard loop of queue q, with descs reused across iterations:
//
//	n := s.Receive(rx)                 // rx descriptors; s.Frame(d.Addr, int(d.Len)) views the bytes
//	... s.RxStamp(d.Addr)              // when it arrived: the XDP program's stamp (ns, afxdp.RxClock)
//	... s.Release(rx[:n])              // back to the fill ring
//	m := s.AllocTx(tx)                 // free frames; write, set Len
//	s.Transmit(tx[:m]); s.Kick()       // tx ring, then wake the kernel
//	s.Complete()                       // sent frames back to the free list
//	idle: poll/epoll on s.Fd()         // readable when the rx ring has frames
//
// Zero-copy is tried first and copy mode is the fallback, with one log line
// saying which. On veth only copy mode exists. netstack.AFXDPLink adapts a
// Socket to netstack.Link.
package afxdp
