package afxdp

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"percore/lab"
)

// BenchmarkTransmit: the kernel's cost of sending full-size frames from the
// server end into a veth whose peer runs an XDP_PASS program, as the
// impaired lab's middle ends do; the peer's stack drops them (they are
// addressed to another host). ns/op is per frame, the peer's receive
// included: on a veth it runs in the sender's context.
//
//   - copy-mode: percore's path. AF_XDP without zero copy (veth has none)
//     builds an skb a frame, and the kernel hands each to the driver with
//     bottom halves enabled again after it, so the peer's NAPI poll runs
//     once a frame.
//   - live-frames: the batched alternative, tried and not taken. BPF_PROG_RUN
//     with BPF_F_TEST_XDP_LIVE_FRAMES runs an XDP program once a frame,
//     here one that copies the frame from an mmapped map (where a shard
//     would write it) into the packet and returns XDP_TX; the kernel runs
//     it in batches of 64 with bottom halves off, handing the frames to the
//     driver's ndo_xdp_xmit in bulks, so the peer's receive runs once a
//     batch. Each call sets up and tears down its own page pool, which
//     costs hundreds of microseconds: too much for a shard that sends a few
//     dozen frames a flush.
func BenchmarkTransmit(b *testing.B) {
	l, s := benchRig(b)
	pass, err := lab.AttachPass(l.ClientNS, l.ClientIf)
	if err != nil {
		b.Fatal(err)
	}
	defer pass.Close()
	frame := otherHostFrame(l)
	// each runs a sub-benchmark, then checks that the peer received every frame.
	each := func(name string, send func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			before := peerReceived(b, l)
			send(b)
			if got := peerReceived(b, l) - before; got < uint64(b.N) {
				b.Fatalf("the peer received %d of %d frames", got, b.N)
			}
		})
	}
	for _, burst := range []int{32, 256, 2048} {
		each(fmt.Sprintf("copy-mode/frames=%d", burst), func(b *testing.B) { transmitCopyMode(b, s, frame, burst) })
		each(fmt.Sprintf("live-frames/frames=%d", burst), func(b *testing.B) { transmitLiveFrames(b, l, frame, burst) })
	}
}

// peerReceived is the frames the client end has received so far.
func peerReceived(b *testing.B, l *lab.Lab) (n uint64) {
	if err := l.ClientNS.Do(func() error {
		link, err := netlink.LinkByName(l.ClientIf)
		if err != nil {
			return err
		}
		n = link.Attrs().Statistics.RxPackets
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return n
}

// otherHostFrame is a 1,514-byte IPv4 frame from the server end addressed to
// a MAC that is not the peer's, so the peer's stack drops it on arrival.
func otherHostFrame(l *lab.Lab) []byte {
	const n = 1514
	f := make([]byte, n)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x99})
	copy(f[6:12], l.ServerMAC)
	f[12], f[13] = 0x08, 0x00 // IPv4
	f[14] = 0x45
	f[16], f[17] = byte((n-14)>>8), byte((n-14)&0xff)
	f[22], f[23] = 64, unix.IPPROTO_UDP
	copy(f[26:30], l.ServerIP.AsSlice())
	copy(f[30:34], l.ClientIP.AsSlice())
	return f
}

// transmitCopyMode sends b.N frames through the socket, burst frames a kick.
func transmitCopyMode(b *testing.B, s *Socket, frame []byte, burst int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	descs := make([]Desc, burst)
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; {
		s.Complete()
		n := s.AllocTx(descs[:min(burst, b.N-sent)])
		if n == 0 {
			if err := s.Kick(); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for i := range descs[:n] {
			copy(s.Frame(descs[i].Addr, len(frame)), frame)
			descs[i].Len = uint32(len(frame))
		}
		sent += s.Transmit(descs[:n])
		if err := s.Kick(); err != nil {
			b.Fatal(err)
		}
	}
	for s.TxOutstanding() > 0 {
		if err := s.Kick(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, s, 0)
}

// transmitLiveFrames sends b.N frames, burst frames a BPF_PROG_RUN call,
// each written first into a slot of an mmapped array map that the program
// copies from.
func transmitLiveFrames(b *testing.B, l *lab.Lab, frame []byte, burst int) {
	const slot = 2048
	frames, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: slot,
		MaxEntries: uint32(burst), Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		b.Fatal(err)
	}
	defer frames.Close()
	next, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer next.Close()
	mem, err := unix.Mmap(frames.FD(), 0, burst*slot, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// i := next[0]; next[0]++
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, next.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R7),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		// copy frames[i % burst] over the packet, and send it
		asm.Mod.Imm(asm.R7, int32(burst)),
		asm.StoreMem(asm.R10, -4, asm.R7, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, frames.FD()),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "drop"),
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Imm(asm.R4, int32(len(frame))),
		asm.FnXdpStoreBytes.Call(),
		asm.Mov.Imm(asm.R0, xdpTX),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("drop"), // XDP_DROP
		asm.Return(),
	}})
	if err != nil {
		b.Skipf("no live-frame program: %v", err)
	}
	defer prog.Close()
	// The run resolves the ingress device in the caller's namespace, so the
	// thread enters the server's and is never unlocked: Go discards it.
	runtime.LockOSThread()
	if err := l.ServerNS.Enter(); err != nil {
		b.Fatal(err)
	}
	ifindex, err := netInterface(l.ServerIf)
	if err != nil {
		b.Fatal(err)
	}
	opts := &ebpf.RunOptions{Data: frame, Repeat: uint32(burst), Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)}}
	if _, err := prog.Run(opts); err != nil {
		b.Skipf("no live frames in this kernel: %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += burst {
		for i := 0; i < burst; i++ {
			copy(mem[i*slot:], frame)
		}
		if _, err := prog.Run(opts); err != nil {
			b.Fatal(err)
		}
	}
}
