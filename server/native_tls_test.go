package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"percore/shard"
)

// TestNativeTLS serves TLS on the native stack (port 10443, cleartext on
// 10000 and 10001 beside it) in the lab and checks, from the client
// namespace: TLS 1.3 and 1.2, ALPN, the OCSP staple and resumption with Go's
// client, curl and openssl s_client; a 64 MiB file by sha256; each bad input
// counted and closed; and, after the server stops, every frame back and no
// helper goroutine left.
func TestNativeTLS(t *testing.T) {
	g0 := runtime.NumGoroutine()
	dir := t.TempDir()
	certPath, keyPath, pool := testCert(t, dir)
	ocsp := []byte{0x30, 0x03, 0x0a, 0x01, 0x06} // OCSPResponse, status unauthorized(6)
	ocspPath := filepath.Join(dir, "ocsp.der")
	must(t, os.WriteFile(ocspPath, ocsp, 0o644))
	nt := startNativeTest(t, 1, append(smallFiles, docrootFile{"m64.bin", 64 << 20}), "", func(o *Options) {
		o.TLS = TLSFiles{Cert: certPath, Key: keyPath, OCSP: ocspPath}
		o.TLSPort = 10443
		o.HeaderTimeout = time.Second
	})
	addr := nt.TLSAddr.String()
	conf := func(v uint16) *tls.Config {
		return &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"http/1.1"},
			MinVersion: v, MaxVersion: v, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	}
	client := func(c *tls.Config) *http.Client {
		tr := &http.Transport{DialContext: nt.dial.DialContext, TLSClientConfig: c, DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 60 * time.Second}
	}
	url := "https://" + addr

	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			c := client(conf(v))
			for i, resume := range []bool{false, true} {
				resp, err := c.Get(fmt.Sprintf("%s/f%d.txt", url, i))
				must(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				st := resp.TLS
				if resp.StatusCode != 200 || string(body) != fmt.Sprintf("file %d\n", i) {
					t.Fatalf("status %d body %q", resp.StatusCode, body)
				}
				if st.Version != v || st.NegotiatedProtocol != "http/1.1" || !bytes.Equal(st.OCSPResponse, ocsp) || st.DidResume != resume {
					t.Fatalf("version %x alpn %q ocsp %q resumed %v (want %v)", st.Version, st.NegotiatedProtocol, st.OCSPResponse, st.DidResume, resume)
				}
			}
		})
	}

	t.Run("64 MiB", func(t *testing.T) {
		code, sum, n := get(t, client(conf(tls.VersionTLS13)), url+"/m64.bin")
		if code != 200 || sum != nt.sums["m64.bin"] {
			t.Fatalf("status %d, %d bytes, sha256 %s, want %s", code, n, sum, nt.sums["m64.bin"])
		}
	})

	t.Run("keep-alive and cleartext beside", func(t *testing.T) {
		c, _ := nt.raw(addr)
		defer c.Close()
		tc := tls.Client(c, conf(tls.VersionTLS13))
		br := bufio.NewReader(tc)
		for i := 0; i < 50; i++ {
			fmt.Fprintf(tc, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n\r\n", i%10)
			resp, body := readResponse(t, br, "GET")
			if want := fmt.Sprintf("file %d\n", i%10); resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
		}
		nt.checkFile(nt.client, "k1.bin")
	})

	// Pipelined far past what TCP and httpd hold, one request per record,
	// before reading any response: TCP keeps what httpd does not take, and
	// every response still comes back whole and in order.
	t.Run("pipelined back-pressure", func(t *testing.T) {
		c, _ := nt.raw(addr)
		defer c.Close()
		tc := tls.Client(c, conf(tls.VersionTLS13))
		const reqs = 48
		for i := 0; i < reqs; i++ {
			_, err := io.WriteString(tc, "GET /m1.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			must(t, err)
		}
		br := bufio.NewReaderSize(tc, 64<<10)
		for i := 0; i < reqs; i++ {
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			must(t, err)
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			if err != nil || hex.EncodeToString(h.Sum(nil)) != nt.sums["m1.bin"] {
				t.Fatalf("response %d: %d bytes, err %v, sha256 differs", i, n, err)
			}
		}
	})

	ip := nt.TLSAddr.Addr().String()
	ns := nt.Lab.ClientNS.Name
	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl not installed")
		}
		for _, v := range [][]string{{"--tlsv1.3"}, {"--tlsv1.2", "--tls-max", "1.2"}} {
			args := append([]string{"netns", "exec", ns, "curl"}, v...)
			args = append(args, "-sS", "--max-time", "10", "--http1.1", "--cacert", certPath,
				"--resolve", fmt.Sprintf("localhost:%d:%s", nt.TLSAddr.Port(), ip), fmt.Sprintf("https://localhost:%d/f5.txt", nt.TLSAddr.Port()))
			out, err := exec.Command("ip", args...).CombinedOutput()
			if err != nil || string(out) != "file 5\n" {
				t.Errorf("curl %v: %v %q", v, err, out)
			}
		}
	})

	t.Run("openssl s_client", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl not installed")
		}
		for _, v := range []string{"-tls1_3", "-tls1_2"} {
			cmd := exec.Command("ip", "netns", "exec", ns, "openssl", "s_client", v, "-connect", addr, "-servername", "localhost",
				"-verify_hostname", "localhost", "-CAfile", certPath, "-alpn", "http/1.1", "-status", "-verify_return_error", "-ign_eof")
			cmd.Stdin = strings.NewReader("GET /f6.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			out, err := cmd.CombinedOutput()
			ok := bytes.Contains(out, []byte("\r\n\r\nfile 6\n")) && bytes.Contains(out, []byte("ALPN protocol: http/1.1")) &&
				bytes.Contains(out, []byte("OCSP Response Status: unauthorized"))
			if err != nil || !ok {
				t.Errorf("openssl s_client %s: %v %q", v, err, out)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) { nativeTLSBadInput(t, nt, addr, conf(tls.VersionTLS13), certPath) })
	t.Run("handshake flood", func(t *testing.T) { nativeTLSFlood(t, nt, addr, conf(tls.VersionTLS13)) })

	// Idle: every connection released (the server closed first on most:
	// those wait in TIME-WAIT, holding no frame).
	nt.client.CloseIdleConnections()
	waitFor(t, nt, 15*time.Second, "connections not released", func(m shard.Report) bool {
		return m.Get("native.open") == 0 && m.Get("tcp.conns") == m.Get("tcp.time_waits") && m.Get("tcp.rcv_bufs_used") == 0
	})
	idle := shard.Merge(nt.Stats())
	nt.stop()
	f := shard.Merge(nt.group.Final())
	if f.Get("native.released") != f.Get("native.accepted") || f.Get("tls.handshaking") != 0 {
		t.Errorf("final: released %d of %d, handshakes in progress %d", f.Get("native.released"), f.Get("native.accepted"), f.Get("tls.handshaking"))
	}
	if got, want := f.Get("xsk.free_frames")+f.Get("ip.held_tx"), idle.Get("xsk.free_frames")+idle.Get("ip.held_tx"); got != want || f.Get("xsk.tx_outstanding") != 0 {
		t.Errorf("tx frames free+held %d (outstanding %d), %d when idle: frames leaked", got, f.Get("xsk.tx_outstanding"), want)
	}
	var g int
	for i := 0; i < 200; i++ {
		if g = runtime.NumGoroutine(); g <= g0+1 { // the namespace dialer's goroutine stays
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if g > g0+1 {
		t.Errorf("%d goroutines after stop, %d before start", g, g0)
	}
	t.Logf("tls: %d handshakes, %d resumed, %d failed, %d timed out, %d cut", f.Get("tls.handshakes"), f.Get("tls.resumed"),
		f.Get("tls.failed"), f.Get("tls.timed_out"), f.Get("tls.cut"))
}

// nativeTLSBadInput sends each bad input of TestTLSBadInput to the native
// stack: each closes its connection and is counted.
func nativeTLSBadInput(t *testing.T, nt *nativeTest, addr string, conf *tls.Config, certPath string) {
	hello := clientHello(t)
	oversized := []byte{22, 3, 3, 0x48, 0x01} // a handshake record of 18433 bytes: over 2^14+2048
	cases := []struct {
		name      string
		send      []byte
		handshake bool // a good handshake first
		hangUp    bool // close our side after sending
		counter   string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, false, "tls.failed"},
		{"truncated record", hello[:len(hello)/2], false, true, "tls.failed"},
		{"oversized record", append(oversized, make([]byte, 64)...), false, false, "tls.failed"},
		{"stops mid-handshake", hello[:len(hello)/2], false, false, "tls.timed_out"},
		{"forged record", append([]byte{23, 3, 3, 0, 40}, make([]byte, 40)...), true, false, "tls.cut"},
		{"truncated record after handshake", []byte{23, 3, 3, 0, 100, 1, 2, 3}, true, true, "tls.cut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := nt.total(tc.counter)
			raw, _ := nt.raw(addr)
			defer raw.Close()
			if tc.handshake {
				must(t, tls.Client(raw, conf).Handshake())
			}
			_, err := raw.Write(tc.send)
			must(t, err)
			if tc.hangUp {
				raw.(interface{ CloseWrite() error }).CloseWrite()
			}
			io.Copy(io.Discard, raw) // an alert at most, then EOF: the server closed
			waitNative(t, nt, tc.counter, before+1)
		})
	}
	t.Run("one-byte segments", func(t *testing.T) {
		raw, _ := nt.raw(addr)
		defer raw.Close()
		c := tls.Client(splitConn{raw}, conf)
		fmt.Fprintf(c, "GET /f4.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, bufio.NewReader(c), "GET")
		if resp.StatusCode != 200 || string(body) != "file 4\n" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("renegotiation", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl not installed")
		}
		before := nt.total("tls.cut")
		cmd := exec.Command("ip", "netns", "exec", nt.Lab.ClientNS.Name, "openssl", "s_client", "-tls1_2", "-connect", addr,
			"-servername", "localhost", "-CAfile", certPath)
		cmd.Stdin = strings.NewReader("R\n")
		out, _ := cmd.CombinedOutput()
		if !bytes.Contains(out, []byte("RENEGOTIATING")) {
			t.Fatalf("openssl did not try to renegotiate: %q", out)
		}
		waitNative(t, nt, "tls.cut", before+1)
	})
}

// waitNative waits (bounded) for a merged counter to reach want, and fails
// if it does not equal it.
func waitNative(t *testing.T, nt *nativeTest, name string, want uint64) {
	t.Helper()
	for i := 0; i < 300 && nt.total(name) < want; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := nt.total(name); got != want {
		t.Fatalf("%s %d, want %d", name, got, want)
	}
}

// nativeTLSFlood keeps a TLS and a cleartext keep-alive connection busy
// while a hundred clients stall in the middle of their handshakes and eight
// more make full handshakes back to back, all on the one shard: every
// keep-alive request completes.
func nativeTLSFlood(t *testing.T, nt *nativeTest, addr string, conf *tls.Config) {
	hello := clientHello(t)
	for i := 0; i < 100; i++ {
		c, _ := nt.raw(addr)
		defer c.Close()
		c.Write(hello[:len(hello)/2])
	}
	full := conf.Clone()
	full.ClientSessionCache = nil
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				raw, err := nt.dial.DialContext(ctx, "tcp", addr)
				cancel()
				if err != nil {
					continue
				}
				c := tls.Client(raw, full)
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Handshake()
				c.Close()
			}
		}()
	}
	h0 := nt.total("tls.handshakes")
	raw, _ := nt.raw(addr)
	defer raw.Close()
	tc := tls.Client(raw, conf)
	pc, _ := nt.raw(nt.Addr.String())
	defer pc.Close()
	const rounds = 300
	for _, c := range []net.Conn{tc, pc} {
		br := bufio.NewReader(c)
		for i := 0; i < rounds; i++ {
			fmt.Fprintf(c, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n\r\n", i%10)
			resp, body := readResponse(t, br, "GET")
			if want := fmt.Sprintf("file %d\n", i%10); resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("during %d keep-alive requests: %d handshakes", 2*rounds, nt.total("tls.handshakes")-h0)
}
