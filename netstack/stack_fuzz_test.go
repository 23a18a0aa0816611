package netstack

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Fuzz input format: a sequence of records
//
//	len:uint16 | flags:uint8 | step:uint8 | frame:len bytes
//
// Each frame is injected; flags bit 0 fixes its IPv4 header checksum and bit
// 1 its ICMP checksum (so mutations get past the checksums), bit 2 polls
// after it; step advances the fake clock by step*50ms before the poll. At
// most fuzzMaxFrames records are used.
const fuzzMaxFrames = 32

func fuzzRecord(frame []byte, flags, step uint8) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(frame)))
	b = append(b, flags, step)
	return append(b, frame...)
}

// fixChecksums rewrites the IPv4 header and ICMP checksums of frame (when it
// is long enough to have them) so mutated frames reach the deeper checks.
func fixChecksums(frame []byte, ip, icmp bool) {
	e := Ethernet(frame)
	if !e.Valid() || e.Type() != EtherTypeIPv4 {
		return
	}
	v := IPv4(e.Payload())
	if v.Check() != IPv4OK {
		return
	}
	v = v[:v.TotalLen()]
	if ip {
		v[ipChecksum], v[ipChecksum+1] = 0, 0
		binary.BigEndian.PutUint16(v[ipChecksum:], Checksum(v[:v.HeaderLen()]))
	}
	if m := ICMPv4(v.Payload()); icmp && v.Protocol() == ProtoICMP && m.Valid() {
		m[icmpChecksum], m[icmpChecksum+1] = 0, 0
		binary.BigEndian.PutUint16(m[icmpChecksum:], Checksum(m))
	}
}

// checkTx asserts that a frame the stack sent is well-formed and ours.
func checkTx(t *testing.T, s *Stack, b []byte) {
	e := Ethernet(b)
	if !e.Valid() || e.Src() != s.cfg.MAC {
		t.Fatalf("sent a frame not from us: % x", b)
	}
	switch e.Type() {
	case EtherTypeARP:
		a := ARP(e.Payload())
		if !a.Valid() || a.SenderMAC() != s.cfg.MAC || a.SenderIP() != s.cfg.Addr || (a.Op() != ARPRequest && a.Op() != ARPReply) {
			t.Fatalf("bad ARP sent: % x", b)
		}
	case EtherTypeIPv4:
		ip := IPv4(e.Payload())
		if !ip.Valid() || !ip.HeaderChecksumOK() || ip.Src() != s.cfg.Addr || ip.TTL() != 64 || ip.IsFragment() ||
			ip.TotalLen() != len(ip) || s.martian(ip.Dst()) {
			t.Fatalf("bad IPv4 sent: % x", b)
		}
		if ip.Protocol() == ProtoICMP {
			if m := ICMPv4(ip.Payload()); !m.Valid() || m.Type() != ICMPv4EchoReply || !m.ChecksumOK() {
				t.Fatalf("bad ICMP sent: % x", b)
			}
		}
	default:
		t.Fatalf("sent EtherType %#x", e.Type())
	}
}

func fuzzSeeds(t testing.TB) [][]byte {
	ping := pingFromB(t, 1, "abcdefgh")
	far := echoFrame(t, macGW, macA, ipFar, ipA, ipOpts{}, false, 7, 1, []byte("x"))
	arpReq := arpFrame(t, macB, MACBroadcast, ARPRequest, macB, ipB, MACZero, ipA)
	gwReply := arpFrame(t, macGW, macA, ARPReply, macGW, ipGW, macA, ipA)
	frag := echoFrame(t, macB, macA, ipB, ipA, ipOpts{frag: 3}, false, 1, 1, nil)
	bReply := arpFrame(t, macB, macA, ARPReply, macB, ipB, macA, ipA) // unsolicited
	flipped := append([]byte(nil), arpReq...)
	flipped[14+arpSHA+5] ^= 0x40 // sender MAC no longer the Ethernet source
	cat := func(rs ...[]byte) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, r...)
		}
		return b
	}
	return [][]byte{
		fuzzRecord(ping, 4, 0),
		fuzzRecord(arpReq, 4, 0),
		cat(fuzzRecord(far, 4, 0), fuzzRecord(nil, 4, 20), fuzzRecord(gwReply, 4, 1)),
		cat(fuzzRecord(far, 0, 0), fuzzRecord(far, 4, 0), fuzzRecord(nil, 4, 100), fuzzRecord(nil, 4, 200)),
		cat(fuzzRecord(frag, 7, 0), fuzzRecord(ping[:30], 7, 0), fuzzRecord(ping, 7, 1)),
		fuzzRecord(make([]byte, 60), 7, 0),
		cat(fuzzRecord(arpReq, 4, 0), fuzzRecord(bReply, 4, 0), fuzzRecord(flipped, 4, 0), fuzzRecord(ping, 4, 0)),
	}
}

// FuzzStackInput feeds arbitrary frame sequences to a stack: it must not
// panic or allocate, must account for every frame in one counter, must give
// back every frame it borrows, and may send only well-formed frames.
func FuzzStackInput(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testConfig()
		cfg.ARPCacheSize, cfg.PendingMax, cfg.Batch, cfg.MaxRxBatches = 8, 4, 8, 2
		s, err := NewStack(cfg)
		if err != nil {
			t.Fatal(err)
		}
		link := NewChanLink(1500, 64)
		now := time.Unix(1_000_000, 0)
		var frame [1514]byte
		var sent [][]byte
		check := func() {
			rx, tx := link.Lent()
			if rx != 0 || tx != s.HeldTx() || s.Pending() > cfg.PendingMax {
				t.Fatalf("lent rx %d tx %d, held %d, pending %d", rx, tx, s.HeldTx(), s.Pending())
			}
			if st := s.Stats(); st.RxOutcomes() != st.RxFrames {
				t.Fatalf("outcomes %d != frames %d: %+v", st.RxOutcomes(), st.RxFrames, st)
			}
			for _, e := range s.arp.e {
				if e.state == arpReachable && (!s.unicastOnLink(e.ip) || s.ours(e.ip) || e.mac.IsMulticast() || e.mac == MACZero) {
					t.Fatalf("ARP cache holds %+v", e)
				}
			}
		}
		run := func() {
			d := data
			for i := 0; i < fuzzMaxFrames && len(d) >= 4; i++ {
				n := int(binary.BigEndian.Uint16(d))
				flags, step := d[2], d[3]
				d = d[4:]
				n = min(n, len(d), len(frame))
				fr := frame[:copy(frame[:], d[:n])]
				d = d[n:]
				fixChecksums(fr, flags&1 != 0, flags&2 != 0)
				link.Inject(fr)
				if flags&4 != 0 || i == fuzzMaxFrames-1 || len(d) < 4 {
					now = now.Add(time.Duration(step) * 50 * time.Millisecond)
					s.Poll(now, link)
					for link.Sent() > 0 {
						b, _ := link.Take()
						if sent != nil {
							sent = append(sent, append([]byte(nil), b...))
						}
					}
				}
			}
			// Let every timer run out.
			for range 3 {
				now = now.Add(time.Minute)
				s.Poll(now, link)
				link.Discard()
			}
		}
		// Checked run: invariants and the frames sent.
		sent = [][]byte{}
		run()
		check()
		for _, b := range sent {
			checkTx(t, s, b)
		}
		if s.Pending() != 0 {
			t.Fatalf("%d frames still pending after all timers", s.Pending())
		}
		// The same input again through the warmed stack: no allocation.
		sent = nil
		if n := testing.AllocsPerRun(1, run); n != 0 {
			t.Fatalf("%v allocations", n)
		}
		check()
	})
}

// TestWriteFuzzCorpus writes the seeds to testdata/fuzz when
// PERCORE_WRITE_CORPUS=1 (the committed corpus is its output).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("PERCORE_WRITE_CORPUS") != "1" {
		t.Skip("set PERCORE_WRITE_CORPUS=1 to regenerate testdata/fuzz/FuzzStackInput")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzStackInput")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds(t) {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "seed"+strconv.Itoa(i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
