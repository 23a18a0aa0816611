package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"percore/shard"
)

// TestNativeSoak opens and closes 10,000 connections from the client
// namespace's kernel (8 at a time, one request each; every tenth asks
// Connection: close so the server closes first), checks every response, and
// then that the server is back to its idle state: no httpd connection, no TCP
// connection but TIME-WAIT ones (which hold no buffers), no receive buffer
// lent, no frame waiting for ARP, every UMEM tx frame back in the free list.
func TestNativeSoak(t *testing.T) {
	const conns, workers = 10000, 8
	nt := startNativeTest(t, 2, nil, "", nil)
	idle := shard.Merge(nt.Stats())
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < conns; i += workers {
				if err := nt.oneShot(i); err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var m shard.Report
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m = shard.Merge(nt.Stats())
		if m.Get("native.open") == 0 && m.Get("tcp.conns") == m.Get("tcp.time_waits") && m.Get("xsk.tx_outstanding") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not idle 20s after the soak: open %d, tcp conns %d (time-wait %d), tx outstanding %d",
				m.Get("native.open"), m.Get("tcp.conns"), m.Get("tcp.time_waits"), m.Get("xsk.tx_outstanding"))
		}
	}
	if d := m.Get("native.accepted") - idle.Get("native.accepted"); d != conns {
		t.Errorf("accepted %d connections, want %d", d, conns)
	}
	if d := m.Get("http.responses_2xx") - idle.Get("http.responses_2xx"); d != conns {
		t.Errorf("%d good responses, want %d", d, conns)
	}
	if m.Get("native.released") != m.Get("native.accepted") {
		t.Errorf("released %d of %d connections", m.Get("native.released"), m.Get("native.accepted"))
	}
	if n := m.Get("tcp.rcv_bufs_used"); n != 0 {
		t.Errorf("%d receive buffers still lent", n)
	}
	if n := m.Get("ip.arp_pending"); n != 0 {
		t.Errorf("%d frames wait for ARP", n)
	}
	// Every tx frame is in the socket's free list or the few the stack keeps
	// for its next Poll, as before the soak.
	if got, want := m.Get("xsk.free_frames")+m.Get("ip.held_tx"), idle.Get("xsk.free_frames")+idle.Get("ip.held_tx"); got != want {
		t.Errorf("tx frames free+held %d, %d before the soak: frames leaked", got, want)
	}
	rs := nt.Stats()
	t.Logf("accepted per shard %v, time-wait %d, drops %d, retransmits %d", perShard(rs, "native.accepted"),
		m.Get("tcp.time_waits"), m.Get("native.drops"), m.Get("tcp.retransmits"))
}

// oneShot opens a connection, sends one request, checks the response and
// closes; request i asks for f(i%10).txt, and every tenth says Connection: close.
func (nt *nativeTest) oneShot(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := nt.dial.DialContext(ctx, "tcp", nt.Addr.String())
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := ""
	if i%10 == 0 {
		hdr = "Connection: close\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n%s\r\n", i%10, hdr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(newReader(c), &http.Request{Method: "GET"})
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("file %d\n", i%10); resp.StatusCode != 200 || string(body) != want {
		return fmt.Errorf("%d %q, want 200 %q", resp.StatusCode, body, want)
	}
	return nil
}
