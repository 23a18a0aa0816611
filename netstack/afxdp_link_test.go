package netstack

import (
	"encoding/binary"
	"testing"
	"time"

	"percore/afxdp"
	"percore/lab"
)

// TestAFXDPLinkRoundTrip sends an ICMP echo request through the Link to the
// client namespace's kernel and receives its echo reply through the Link.
func TestAFXDPLinkRoundTrip(t *testing.T) {
	if err := afxdp.Supported(); err != nil {
		t.Skip(err)
	}
	l, err := lab.New(lab.Config{Prefix: "pl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var (
		p *afxdp.Program
		s *afxdp.Socket
	)
	err = l.ServerNS.Do(func() (err error) {
		if p, err = afxdp.NewProgram(afxdp.ProgramConfig{IP: l.ServerIP}); err != nil {
			return err
		}
		if err = p.Attach(l.ServerIf, afxdp.Native); err != nil {
			return err
		}
		if s, err = afxdp.Open(afxdp.Config{Interface: l.ServerIf, FrameCount: 256, Logf: t.Logf}); err != nil {
			return err
		}
		return p.Register(s)
	})
	t.Cleanup(func() {
		if s != nil {
			s.Close()
		}
		if p != nil {
			p.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The client knows our MAC without asking: no ARP responder needed here.
	if err := lab.AddNeighbour(l.ClientNS, l.ClientIf, l.ServerIP, l.ServerMAC); err != nil {
		t.Fatal(err)
	}

	link, err := NewAFXDPLink(s, 1500, 16)
	if err != nil {
		t.Fatal(err)
	}
	fs := make([]Frame, 16)
	if n := link.TxAlloc(fs[:1]); n != 1 || len(fs[0].Buf) != 1514 {
		t.Fatalf("TxAlloc = %d, len %d", n, len(fs[0].Buf))
	}
	req := fs[0].Buf[:14+20+16]
	copy(req[0:6], l.ClientMAC)
	copy(req[6:12], l.ServerMAC)
	binary.BigEndian.PutUint16(req[12:], 0x0800)
	ip := req[14:34]
	clear(ip)
	ip[0], ip[8], ip[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(ip[2:], 36)
	src, dst := l.ServerIP.As4(), l.ClientIP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip))
	icmp := req[34:]
	clear(icmp)
	icmp[0] = 8
	binary.BigEndian.PutUint16(icmp[4:], 0x7063)
	binary.BigEndian.PutUint16(icmp[6:], 1)
	binary.BigEndian.PutUint16(icmp[2:], Checksum(icmp))
	fs[0].Buf = req
	sent := time.Now()
	link.TxSubmit(fs[:1])
	link.Flush()

	var got []byte
	var gotAt, read time.Time
	at := make([]int64, len(fs))
	for end := time.Now().Add(3 * time.Second); got == nil && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		link.Flush()
		n := link.RxBatch(fs, at)
		read = time.Now()
		for i, f := range fs[:n] {
			if len(f.Buf) >= 42 && f.Buf[23] == 1 && f.Buf[34] == 0 && binary.BigEndian.Uint16(f.Buf[38:]) == 0x7063 {
				got, gotAt = append([]byte(nil), f.Buf...), link.RxClock().Add(time.Duration(at[i]))
			}
		}
		link.RxDone(fs[:n])
	}
	if got == nil {
		st, _ := s.Stats()
		t.Fatalf("no echo reply through the link; socket stats %+v", st)
	}
	if gotAt.Before(sent) || gotAt.After(read) {
		t.Errorf("echo reply arrived at %v, outside [%v, %v]: the XDP program's stamp is lost", gotAt, sent, read)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TxFrames != 1 || st.Completed != 1 || st.FreeFrames != 128 {
		t.Errorf("stats after round trip: %+v", st)
	}
	allocs := testing.AllocsPerRun(100, func() {
		n := link.TxAlloc(fs[:8])
		link.TxFree(fs[:n])
		n = link.RxBatch(fs, at)
		link.RxDone(fs[:n])
		link.Flush()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Link cycle", allocs)
	}
}
