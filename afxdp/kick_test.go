package afxdp

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/lab"
)

// TestKickSendsLargeBatch queues more frames than copy mode sends per
// sendto (the budget is set back to the kernel's default of 32) and checks
// one Kick sends them all: 200 echo requests to the client, whose kernel
// answers every one.
func TestKickSendsLargeBatch(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pk"})
	_, socks := attachLab(t, l, ProgramConfig{IP: l.ServerIP}, Config{FrameCount: 512, Logf: t.Logf}, 1)
	s := socks[0]
	unix.SetsockoptInt(s.fd, unix.SOL_XDP, unix.XDP_MAX_TX_SKB_BUDGET, 32) // best effort: older kernels have 32 anyway
	if err := lab.AddNeighbour(l.ClientNS, l.ClientIf, l.ServerIP, l.ServerMAC); err != nil {
		t.Fatal(err)
	}

	const frames = 200
	tx := make([]Desc, frames)
	if n := s.AllocTx(tx); n != frames {
		t.Fatalf("AllocTx = %d", n)
	}
	for i := range tx {
		f := icmpEcho(t, l.ServerIP, l.ClientIP, 0x7063, uint16(i))
		copy(f[0:6], l.ClientMAC)
		copy(f[6:12], l.ServerMAC)
		copy(s.Frame(tx[i].Addr, len(f)), f)
		tx[i].Len = uint32(len(f))
	}
	if n := s.Transmit(tx); n != frames {
		t.Fatalf("Transmit = %d", n)
	}
	if err := s.Kick(); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Stats()
	t.Logf("one Kick: %d sendto calls, %d EAGAIN/EBUSY/ENOBUFS", st.Kicks, st.KickBusy)
	if st.TxOutstanding != 0 {
		t.Errorf("after one Kick %d frames still on the tx ring (%d sendto calls, %d busy)", st.TxOutstanding, st.Kicks, st.KickBusy)
	}
	// Every request reaches the client, which answers each one.
	seen := map[uint16]bool{}
	rx := make([]Desc, 64)
	for end := time.Now().Add(5 * time.Second); len(seen) < frames && time.Now().Before(end); {
		s.Kick()
		s.Complete()
		n := s.Receive(rx)
		for _, d := range rx[:n] {
			f := s.Frame(d.Addr, int(d.Len))
			if len(f) >= 42 && f[23] == unix.IPPROTO_ICMP && f[34] == 0 && binary.BigEndian.Uint16(f[38:]) == 0x7063 {
				seen[binary.BigEndian.Uint16(f[40:])] = true
			}
		}
		s.Release(rx[:n])
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(seen) != frames {
		t.Errorf("%d of %d echo requests answered", len(seen), frames)
	}
	s.Complete()
	if st, _ := s.Stats(); st.Completed != frames || st.FreeFrames != 256 {
		t.Errorf("completions %d free %d, want %d and 256", st.Completed, st.FreeFrames, frames)
	}
}
