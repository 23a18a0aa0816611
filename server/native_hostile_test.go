package server

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/lab"
	"percore/netstack"
	"percore/shard"
)

// Hostile clients (issue 5, "Bad input and faults"): a SYN flood and a client
// that vanishes mid-response do not disturb the other connections, and the
// server's tables return to idle afterwards. The faults are made in the
// client namespace: raw SYNs from spoofed lab addresses, nftables drops.

// nftInClient loads an nftables ruleset into the lab's client namespace; it
// goes with the namespace at cleanup.
func nftInClient(t *testing.T, nt *nativeTest, rules string) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs nft (apt-get install nftables) for client-side faults")
	}
	cmd := exec.Command("ip", "netns", "exec", nt.Lab.ClientNS.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v\n%s", nt.Lab.ClientNS.Name, err, out)
	}
}

// waitFor polls the merged counters until ok says yes, at most d.
func waitFor(t *testing.T, nt *nativeTest, d time.Duration, what string, ok func(m shard.Report) bool) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		m := shard.Merge(nt.Stats())
		if ok(m) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s: tcp conns %d syn_rcvd %d time_waits %d, native open %d; all counters: %v", d, what,
				m.Get("tcp.conns"), m.Get("tcp.syn_rcvd"), m.Get("tcp.time_waits"), m.Get("native.open"), m)
		}
	}
}

// checkIdle closes the test's keep-alive connections and waits until no
// connection, handshake, receive buffer or ARP wait is left on any shard and
// httpd released every connection it was given.
func checkIdle(t *testing.T, nt *nativeTest) {
	t.Helper()
	nt.client.CloseIdleConnections()
	waitFor(t, nt, 15*time.Second, "tables not back to idle", func(m shard.Report) bool {
		return m.Get("tcp.conns") == 0 && m.Get("native.open") == 0
	})
	m := shard.Merge(nt.Stats())
	if m.Get("tcp.rcv_bufs_used") != 0 || m.Get("ip.arp_pending") != 0 || m.Get("native.released") != m.Get("native.accepted") {
		t.Fatalf("idle: %d receive buffers lent, %d frames wait for ARP, %d of %d connections released",
			m.Get("tcp.rcv_bufs_used"), m.Get("ip.arp_pending"), m.Get("native.released"), m.Get("native.accepted"))
	}
}

// synPacket writes a 40-byte IPv4 SYN from src:sport to dst:dport into b.
// The kernel fills in the IPv4 total length and checksum (IP_HDRINCL); the
// TCP checksum is ours.
func synPacket(b []byte, src, dst [4]byte, sport, dport uint16, seq uint32) {
	clear(b)
	b[0], b[8], b[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(b[2:], 40)
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	t := b[20:40]
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	t[12], t[13] = 5<<4, 0x02 // data offset 5, SYN
	binary.BigEndian.PutUint16(t[14:], 64240)
	sum := uint32(unix.IPPROTO_TCP) + 20
	for i := 12; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(t[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(t[16:], ^uint16(sum))
}

// spoofSources configures hosts .100 to .100+n-1 of the lab subnet on the
// client end and drops every packet to them there: they answer ARP, so the
// server's SYN-ACKs leave, but never complete a handshake, as a flooder.
func spoofSources(t *testing.T, nt *nativeTest, n int) {
	t.Helper()
	l := nt.Lab
	var set []string
	for i := 0; i < n; i++ {
		a := lab.Host(l.Subnet, byte(100+i))
		must(t, lab.AddAddr(l.ClientNS, l.ClientIf, netip.PrefixFrom(a, 32)))
		set = append(set, a.String())
	}
	nftInClient(t, nt, fmt.Sprintf("table ip pcflood {\n chain in {\n type filter hook input priority 0; ip daddr { %s } drop\n }\n}\n", strings.Join(set, ", ")))
}

// sendSYNs sends count SYNs to the server's port from a raw socket in the
// client namespace, from the srcs spoofed sources in turn, each from a new
// port.
func sendSYNs(nt *nativeTest, srcs, count int) error {
	l := nt.Lab
	return l.ClientNS.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		dst := &unix.SockaddrInet4{Addr: l.ServerIP.As4()}
		b := make([]byte, 40)
		for i := 0; i < count; i++ {
			synPacket(b, lab.Host(l.Subnet, byte(100+i%srcs)).As4(), dst.Addr, uint16(20000+i/srcs), nt.Addr.Port(), uint32(i)*2654435761)
			if err := unix.Sendto(fd, b, 0, dst); err != nil {
				return fmt.Errorf("SYN %d: %w", i, err)
			}
		}
		return nil
	})
}

// TestNativeSYNFlood: 20,000 SYNs from 16 spoofed lab addresses (configured
// on the client end, their SYN-ACKs dropped there, so no handshake ever
// completes, as from a flooder) while a net/http client keeps doing
// keep-alive requests and every tenth request on a fresh connection. Every
// request succeeds, the backlog fills and SYN cookies answer the rest, no
// shard's table outgrows MaxConns or its backlog, and afterwards the
// half-open connections time out and the tables are idle again.
func TestNativeSYNFlood(t *testing.T) {
	const maxConns, backlog, syns, srcs = 256, 32, 20000, 16
	nt := startNativeTest(t, 2, smallFiles, "", func(o *Options) {
		o.Native.MaxConns = maxConns
		o.Native.tcp = func(c *netstack.TCPConfig) {
			c.SynBacklog = backlog
			c.RTOInitial = 300 * time.Millisecond // half-open entries go after 2.1 s
			c.SynRetries = 2
			c.TimeWait = time.Second
		}
	})
	spoofSources(t, nt, srcs)
	done := make(chan error, 1)
	go func() { done <- sendSYNs(nt, srcs, syns) }()

	fresh := nt.httpClient(false)
	var peakConns, peakSynRcvd uint64
	reqs := 0
	for flooding := true; flooding || reqs < 100; reqs++ {
		select {
		case err := <-done:
			must(t, err)
			flooding = false
		default:
		}
		c := nt.client
		if reqs%10 == 9 {
			c = fresh
		}
		nt.checkFile(c, []string{"b1.bin", "k1.bin"}[reqs%2])
		for _, r := range nt.Stats() {
			peakConns = max(peakConns, r.Get("tcp.conns"))
			peakSynRcvd = max(peakSynRcvd, r.Get("tcp.syn_rcvd"))
		}
	}
	m := shard.Merge(nt.Stats())
	t.Logf("%d requests during the flood; peak conns %d, syn_rcvd %d per shard; cookies sent %d, syn_rcvd timeouts %d, table full %d, drops %d",
		reqs, peakConns, peakSynRcvd, m.Get("tcp.syn_cookies_sent"), m.Get("tcp.syn_rcvd_timeout"), m.Get("tcp.table_full"), m.Sum(shard.Drop))
	// Cookies go out only while the backlog is full; the peaks are samples
	// between requests, so they bound but need not catch the backlog full.
	if m.Get("tcp.syn_cookies_sent") == 0 {
		t.Fatalf("the flood did not fill the backlog: no SYN cookie sent")
	}
	if peakConns > maxConns || peakSynRcvd > backlog {
		t.Fatalf("peak per shard: %d conns (max %d), %d half-open (backlog %d)", peakConns, maxConns, peakSynRcvd, backlog)
	}
	if got := m.Get("tcp.syn_cookies_sent") + m.Get("tcp.passive_opens") + m.Get("tcp.table_full"); got == 0 {
		t.Fatalf("no SYN handled")
	}
	waitFor(t, nt, 10*time.Second, "half-open connections left", func(m shard.Report) bool { return m.Get("tcp.syn_rcvd") == 0 })
	if m := shard.Merge(nt.Stats()); m.Get("tcp.syn_rcvd_timeout") == 0 {
		t.Fatalf("no half-open connection timed out")
	}
	checkIdle(t, nt)
}

// TestNativeVanishedClient: a client that disappears in the middle of a
// 1 MiB response (it stops reading and closes with SO_LINGER 0, and an
// nftables rule in the client namespace drops every RST from its port, so
// the server never hears from it again) while a keep-alive client keeps
// fetching: every other request succeeds, and the server aborts the vanished
// connection, by its retransmission limit (3 retries here) when data was in
// flight or by httpd's idle timeout (2 s here) when the peer's window was
// closed, and releases it.
func TestNativeVanishedClient(t *testing.T) {
	nt := startNativeTest(t, 2, smallFiles, "", func(o *Options) {
		o.IdleTimeout = 2 * time.Second
		o.Native.tcp = func(c *netstack.TCPConfig) {
			c.Retries = 3
			c.RTOMax = time.Second
			c.TimeWait = time.Second
		}
	})
	nt.checkFile(nt.client, "k1.bin") // the keep-alive connection is open first
	c, br := nt.raw(nt.Addr.String())
	c.(*net.TCPConn).SetReadBuffer(16 << 10) // a small window: most of the response is still to send when it goes
	port := c.LocalAddr().(*net.TCPAddr).Port
	nftInClient(t, nt, fmt.Sprintf("table inet pcgone {\n chain out {\n type filter hook output priority 0; tcp sport %d tcp flags & rst == rst drop\n }\n}\n", port))
	_, err := io.WriteString(c, "GET /m1.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	if _, err := io.CopyN(io.Discard, br, 128<<10); err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()

	reqs := 0
	gone := func() uint64 { return nt.total("tcp.rto_aborts") + nt.total("native.timeouts") }
	for ; reqs < 20 || gone() == 0; reqs++ {
		if reqs > 5000 {
			t.Fatalf("vanished connection not aborted after %d requests", reqs)
		}
		nt.checkFile(nt.client, []string{"k1.bin", "m1.bin", "b1.bin"}[reqs%3])
	}
	m := shard.Merge(nt.Stats())
	t.Logf("%d requests meanwhile; rto timeouts %d, rto aborts %d, persist probes %d, idle timeouts %d",
		reqs, m.Get("tcp.rto_timeouts"), m.Get("tcp.rto_aborts"), m.Get("tcp.persist_probes"), m.Get("native.timeouts"))
	if gone() != 1 || m.Get("native.open") != 1 || m.Get("tcp.resets_in") != 0 {
		t.Fatalf("aborts %d, open %d, resets in %d; want 1 (the vanished client), 1 (the keep-alive one), 0",
			gone(), m.Get("native.open"), m.Get("tcp.resets_in"))
	}
	checkIdle(t, nt)
}

// TestNativeCookieSilentClient: a client whose handshake completes by SYN
// cookie (the one-entry backlog is held by a spoofed SYN) and which then
// sends nothing, and does not even close after the server's FIN, is closed
// by httpd's idle timeout and TCP's FIN-WAIT-2 timeout like any other: a
// flood of completed-but-silent handshakes cannot pin the connection table.
// The idle timeout counts once, however long the client lingers.
func TestNativeCookieSilentClient(t *testing.T) {
	nt := startNativeTest(t, 1, smallFiles, "", func(o *Options) {
		o.IdleTimeout = 500 * time.Millisecond
		o.Native.tcp = func(c *netstack.TCPConfig) {
			c.SynBacklog = 1
			c.RTOInitial = 2 * time.Second // the spoofed entry holds the backlog 6 s
			c.SynRetries = 1
			c.TimeWait = time.Second
			c.FinWait2 = time.Second
		}
	})
	spoofSources(t, nt, 1)
	must(t, sendSYNs(nt, 1, 1))
	waitFor(t, nt, 5*time.Second, "spoofed SYN not in the backlog", func(m shard.Report) bool { return m.Get("tcp.syn_rcvd") == 1 })
	c, br := nt.raw(nt.Addr.String())
	// connect returns when the client sent its ACK, not when the server took it.
	waitFor(t, nt, 5*time.Second, "no handshake by cookie", func(m shard.Report) bool { return m.Get("tcp.syn_cookies_ok") == 1 })
	expectClosed(t, c, br)
	waitFor(t, nt, 5*time.Second, "no FIN-WAIT-2 timeout", func(m shard.Report) bool { return m.Get("tcp.fin_wait2_timeout") == 1 })
	m := shard.Merge(nt.Stats())
	if m.Get("native.timeouts") != 1 || m.Get("http.timeouts") != 1 || m.Get("tcp.app_timeouts") != 1 || m.Get("native.accepted") != 1 {
		t.Fatalf("timeouts %d (http %d, tcp %d) of %d connections, want 1 of 1; all counters: %v",
			m.Get("native.timeouts"), m.Get("http.timeouts"), m.Get("tcp.app_timeouts"), m.Get("native.accepted"), m)
	}
	c.Close()
	nt.checkFile(nt.client, "k1.bin")
	checkIdle(t, nt)
}
