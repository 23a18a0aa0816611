package lab

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"percore/afxdp"
)

// TestImpairAFXDPTx checks that frames the server end transmits through
// AF_XDP sockets (copy mode on veth, one socket per queue) cross the bridge
// to the client, with and without the XDP_PASS programs on the middle ends:
// AF_XDP copy-mode tx hands the driver an skb, which a veth peer takes
// without an XDP program, unlike XDP_TX (TestImpairXDPTx).
func TestImpairAFXDPTx(t *testing.T) {
	needRoot(t)
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
	im, err := NewImpaired(Config{Queues: 2}, ImpairSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	var socks []*afxdp.Socket
	t.Cleanup(func() {
		for _, s := range socks {
			s.Close()
		}
	})
	if err := im.ServerNS.Do(func() error {
		for q := range im.Queues {
			s, err := afxdp.Open(afxdp.Config{Interface: im.ServerIf, Queue: q, FrameCount: 64, Logf: t.Logf})
			if err != nil {
				return err
			}
			socks = append(socks, s)
		}
		return nil
	}); err != nil {
		t.Fatalf("open AF_XDP sockets on the server end: %v", err)
	}
	rx := clientTestSocket(t, im)

	const n = 8 // per queue and round
	check := func(round int) {
		t.Helper()
		want := map[uint32]bool{}
		for q, s := range socks {
			first := uint32((round*len(socks) + q) * n)
			xskSend(t, s, im, first, n)
			for i := range uint32(n) {
				want[first+i] = true
			}
		}
		buf := make([]byte, 2048)
		for len(want) > 0 {
			m, err := unix.Read(rx, buf) // SO_RCVTIMEO bounds the wait
			if err != nil {
				t.Fatalf("round %d: %d AF_XDP frames missing at the client: %v\n%v", round, len(want), err, im.Bridge.Stats())
			}
			seq := binary.BigEndian.Uint32(buf[14:])
			if m < 18 || !want[seq] {
				t.Fatalf("round %d: unexpected frame %x", round, buf[:m])
			}
			delete(want, seq)
		}
	}
	check(0)
	for _, x := range im.xdpPass {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check(1)
}

// xskSend transmits n test frames numbered from first on s, from the server
// MAC to the client MAC, and kicks until the kernel has taken them.
func xskSend(t *testing.T, s *afxdp.Socket, im *Impaired, first uint32, n int) {
	t.Helper()
	descs := make([]afxdp.Desc, n)
	if got := s.AllocTx(descs); got != n {
		t.Fatalf("AllocTx: %d of %d frames", got, n)
	}
	for i := range descs {
		f := s.Frame(descs[i].Addr, 60)
		clear(f)
		copy(f, im.ClientMAC)
		copy(f[6:], im.ServerMAC)
		binary.BigEndian.PutUint16(f[12:], etherTest)
		binary.BigEndian.PutUint32(f[14:], first+uint32(i))
		descs[i].Len = 60
	}
	if got := s.Transmit(descs); got != n {
		t.Fatalf("Transmit: %d of %d frames queued", got, n)
	}
	for range 100 {
		if err := s.Kick(); err != nil {
			t.Fatalf("kick: %v", err)
		}
		s.Complete()
		if s.TxOutstanding() == 0 {
			return
		}
	}
	t.Fatalf("%d frames still on the tx ring after 100 kicks", s.TxOutstanding())
}
