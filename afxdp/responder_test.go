package afxdp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// responder answers ARP and ICMP echo for one IP from userspace on one
// socket, and counts TCP SYNs by source port: the lab tests' stand-in for
// the netstack. Counters are atomics because the test goroutine reads them.
type responder struct {
	s    *Socket
	ip   [4]byte
	mac  net.HardwareAddr
	arp  atomic.Uint64
	icmp atomic.Uint64
	syn  atomic.Uint64
	// synOther counts SYNs to ports other than listenPort: the program
	// should never steer them here.
	synOther atomic.Uint64
	// synPorts[sport] counts SYNs seen from that client port; written by the
	// responder goroutine, read by the test after it stops.
	synPorts map[uint16]int
}

func newResponder(s *Socket, ip netip.Addr, mac net.HardwareAddr) *responder {
	return &responder{s: s, ip: ip.As4(), mac: mac, synPorts: map[uint16]int{}}
}

// run serves until stop is closed, blocking in poll when idle.
func (r *responder) run(stop <-chan struct{}) {
	rx := make([]Desc, 64)
	tx := make([]Desc, 64)
	pfd := []unix.PollFd{{Fd: int32(r.s.Fd()), Events: unix.POLLIN}}
	for {
		select {
		case <-stop:
			return
		default:
		}
		r.s.Complete()
		n := r.s.Receive(rx)
		if n == 0 {
			r.s.Kick()
			unix.Poll(pfd, 5)
			continue
		}
		m := r.s.AllocTx(tx[:n])
		k := 0
		for _, d := range rx[:n] {
			in := r.s.Frame(d.Addr, int(d.Len))
			if k == m {
				break
			}
			out := r.s.Frame(tx[k].Addr, len(in))
			if r.reply(in, out) {
				tx[k].Len = uint32(len(in))
				k++
			}
		}
		r.s.FreeTx(tx[k:m])
		r.s.Transmit(tx[:k])
		r.s.Kick()
		r.s.Release(rx[:n])
	}
}

// reply writes the answer to in into out (same length) and reports whether
// there is one.
func (r *responder) reply(in, out []byte) bool {
	if len(in) < 14 {
		return false
	}
	switch binary.BigEndian.Uint16(in[12:]) {
	case 0x0806:
		if len(in) < 42 || binary.BigEndian.Uint16(in[20:]) != 1 || [4]byte(in[38:42]) != r.ip {
			return false
		}
		copy(out, in)
		copy(out[0:6], in[6:12])  // to the asker
		copy(out[6:12], r.mac)    // from us
		out[21] = 2               // reply
		copy(out[22:28], r.mac)   // sender hw
		copy(out[28:32], r.ip[:]) // sender ip
		copy(out[32:42], in[22:32])
		r.arp.Add(1)
		return true
	case 0x0800:
		if len(in) < 34 || in[14]>>4 != 4 {
			return false
		}
		ihl := int(in[14]&0xf) * 4
		l4 := 14 + ihl
		switch in[23] {
		case unix.IPPROTO_ICMP:
			if len(in) < l4+8 || in[l4] != 8 {
				return false
			}
			copy(out, in)
			copy(out[0:6], in[6:12])
			copy(out[6:12], r.mac)
			copy(out[26:30], in[30:34]) // src <- dst
			copy(out[30:34], in[26:30]) // dst <- src
			out[22] = 64                // ttl
			out[24], out[25] = 0, 0
			binary.BigEndian.PutUint16(out[24:], checksum(out[14:l4]))
			out[l4] = 0 // echo reply
			out[l4+2], out[l4+3] = 0, 0
			binary.BigEndian.PutUint16(out[l4+2:], checksum(out[l4:14+int(binary.BigEndian.Uint16(in[16:]))]))
			r.icmp.Add(1)
			return true
		case unix.IPPROTO_TCP:
			if len(in) >= l4+14 && in[l4+13]&0x02 != 0 {
				if binary.BigEndian.Uint16(in[l4+2:]) != listenPort {
					r.synOther.Add(1)
					return false
				}
				r.synPorts[binary.BigEndian.Uint16(in[l4:])]++
				r.syn.Add(1)
			}
		}
	}
	return false
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for ; len(b) >= 2; b = b[2:] {
		s += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
