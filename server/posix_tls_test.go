package server

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
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

	"golang.org/x/sys/unix"

	"percore/wreck"
)

// testCert writes a self-signed ECDSA P-256 certificate for 127.0.0.1 and
// its key into dir and returns their paths and a pool that trusts it.
func testCert(t *testing.T, dir string) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	return testCertTB(t, dir)
}

func testCertTB(t testing.TB, dir string) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	must := func(t testing.TB, err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "percore test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// tlsTestServer is a testServer with TLS on a port of its own beside cleartext.
type tlsTestServer struct {
	*testServer
	pool     *x509.CertPool
	certPath string
	ocsp     []byte
}

func startTLSServer(t *testing.T, tweak func(*Options)) *tlsTestServer {
	t.Helper()
	dir := t.TempDir()
	certPath, keyPath, pool := testCert(t, dir)
	// An OCSPResponse whose status is unauthorized(6): valid DER that
	// openssl s_client -status parses and prints, without a responder.
	ocsp := []byte{0x30, 0x03, 0x0a, 0x01, 0x06}
	ocspPath := filepath.Join(dir, "ocsp.der")
	must(t, os.WriteFile(ocspPath, ocsp, 0o644))
	ts := startTestServer(t, func(o *Options) {
		o.TLS = TLSFiles{Cert: certPath, Key: keyPath, OCSP: ocspPath}
		o.TLSPort = 0
		if tweak != nil {
			tweak(o)
		}
	})
	return &tlsTestServer{testServer: ts, pool: pool, certPath: certPath, ocsp: ocsp}
}

func (ts *tlsTestServer) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: ts.pool, NextProtos: []string{"http/1.1"}}
}

// get fetches path over a new TLS connection made with conf.
func (ts *tlsTestServer) get(t *testing.T, conf *tls.Config, path string) (*http.Response, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("https://" + ts.TLSAddr.String() + path)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp, body
}

// noLeaks records the goroutines and descriptors now and, at cleanup, waits
// (bounded) for both to come back to that level.
func noLeaks(t *testing.T) {
	t.Helper()
	g0, fd0 := runtime.NumGoroutine(), openFDs(t)
	t.Cleanup(func() {
		var g, fd int
		for i := 0; i < 200; i++ {
			if g, fd = runtime.NumGoroutine(), openFDs(t); g <= g0 && fd <= fd0 {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Errorf("leak: %d goroutines (was %d), %d descriptors (was %d)", g, g0, fd, fd0)
	})
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents)
}

// TestTLSServe: TLS 1.3 and 1.2, ALPN, the OCSP staple, resumption from a
// session ticket, a large static file whole, and cleartext beside it.
func TestTLSServe(t *testing.T) {
	noLeaks(t)
	big := make([]byte, 64<<20)
	rand.Read(big)
	var ts *tlsTestServer
	ts = startTLSServer(t, func(o *Options) {
		must(t, os.WriteFile(filepath.Join(o.Docroot, "big.bin"), big, 0o644))
	})
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			conf := ts.clientConfig()
			conf.MinVersion, conf.MaxVersion = v, v
			conf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			resp, body := ts.get(t, conf, "/f1.txt")
			st := resp.TLS
			if resp.StatusCode != 200 || string(body) != "file 1\n" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			if st.Version != v || st.NegotiatedProtocol != "http/1.1" || !bytes.Equal(st.OCSPResponse, ts.ocsp) || st.DidResume {
				t.Fatalf("version %x alpn %q ocsp %q resumed %v", st.Version, st.NegotiatedProtocol, st.OCSPResponse, st.DidResume)
			}
			resp, _ = ts.get(t, conf, "/f2.txt")
			if !resp.TLS.DidResume {
				t.Fatal("second connection did not resume from the session ticket")
			}
		})
	}
	resp, body := ts.get(t, ts.clientConfig(), "/big.bin")
	if resp.StatusCode != 200 || sha256.Sum256(body) != sha256.Sum256(big) {
		t.Fatalf("big.bin: status %d, %d bytes, sha256 differs", resp.StatusCode, len(body))
	}
	r, err := http.Get(ts.base + "/f3.txt")
	must(t, err)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("cleartext beside TLS: status %d", r.StatusCode)
	}
	if h, res := ts.counter("tls.handshakes"), ts.counter("tls.resumed"); h != 5 || res != 2 {
		t.Fatalf("tls.handshakes %d (want 5), tls.resumed %d (want 2)", h, res)
	}
}

// TestTLSOnPort: without a TLS port of its own, --port speaks TLS only.
func TestTLSOnPort(t *testing.T) {
	ts := startTLSServer(t, func(o *Options) { o.TLSPort = -1 })
	if ts.Addr != ts.TLSAddr {
		t.Fatalf("Addr %v, TLSAddr %v: want the same", ts.Addr, ts.TLSAddr)
	}
	if _, body := ts.get(t, ts.clientConfig(), "/f0.txt"); string(body) != "file 0\n" {
		t.Fatalf("body %q", body)
	}
}

// splitConn writes one byte per write: with TCP_NODELAY, tiny segments.
type splitConn struct{ net.Conn }

func (c splitConn) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// clientHello returns the first flight of a real TLS 1.3 client.
func clientHello(t *testing.T) []byte {
	a, b := net.Pipe()
	go func() {
		c := tls.Client(a, &tls.Config{InsecureSkipVerify: true})
		c.Handshake()
		a.Close()
	}()
	buf := make([]byte, 4096)
	n, err := b.Read(buf)
	must(t, err)
	b.Close()
	return buf[:n]
}

// TestTLSBadInput: each bad input closes its connection, is counted, and
// leaks no goroutine or descriptor; a ClientHello in one-byte segments is
// not bad, only slow, and is served.
func TestTLSBadInput(t *testing.T) {
	noLeaks(t)
	ts := startTLSServer(t, func(o *Options) { o.HeaderTimeout = 300 * time.Millisecond })
	hello := clientHello(t)
	oversized := []byte{22, 3, 3, 0x48, 0x01} // a handshake record of 18433 bytes: over 2^14+2048
	cases := []struct {
		name    string
		send    []byte
		hangUp  bool // close our side after sending
		counter string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, "tls.failed"},
		{"truncated record", hello[:len(hello)/2], true, "tls.failed"},
		{"oversized record", append(oversized, make([]byte, 64)...), false, "tls.failed"},
		{"stops mid-handshake", hello[:len(hello)/2], false, "tls.timed_out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.counter(tc.counter)
			c, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
			must(t, err)
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Write(tc.send)
			must(t, err)
			if tc.hangUp {
				c.(*net.TCPConn).CloseWrite()
			}
			io.Copy(io.Discard, c) // an alert at most, then EOF: the server closed
			for i := 0; i < 200 && ts.counter(tc.counter) == before; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if ts.counter(tc.counter) != before+1 {
				t.Fatalf("%s %d, want %d", tc.counter, ts.counter(tc.counter), before+1)
			}
		})
	}
	t.Run("one-byte segments", func(t *testing.T) {
		raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
		must(t, err)
		c := tls.Client(splitConn{raw}, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1"})
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /f4.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "file 4\n" {
			t.Fatalf("body %q", body)
		}
	})
	// After a good handshake: a forged record, a truncated one, and (with
	// openssl) a renegotiation attempt each cut the connection.
	after := []struct {
		name   string
		send   []byte
		hangUp bool
	}{
		{"forged record", append([]byte{23, 3, 3, 0, 40}, make([]byte, 40)...), false},
		{"truncated record after handshake", []byte{23, 3, 3, 0, 100, 1, 2, 3}, true},
	}
	for _, tc := range after {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.counter("tls.cut")
			raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
			must(t, err)
			defer raw.Close()
			raw.SetDeadline(time.Now().Add(10 * time.Second))
			c := tls.Client(raw, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1"})
			must(t, c.Handshake())
			_, err = raw.Write(tc.send)
			must(t, err)
			if tc.hangUp {
				raw.(*net.TCPConn).CloseWrite()
			}
			io.Copy(io.Discard, raw)
			waitCounter(t, ts.testServer, "tls.cut", before+1)
		})
	}
	// An unknown server name is not an error: the server has one
	// certificate and sends it whatever the name; the client, which cannot
	// match it, decides.
	t.Run("unknown SNI", func(t *testing.T) {
		conf := &tls.Config{RootCAs: ts.pool, ServerName: "unknown.example"}
		if _, err := tls.Dial("tcp", ts.TLSAddr.String(), conf); err == nil || !strings.Contains(err.Error(), "unknown.example") {
			t.Fatalf("a validating client: %v, want a name mismatch", err)
		}
		conf = &tls.Config{InsecureSkipVerify: true, ServerName: "unknown.example"}
		c, err := tls.Dial("tcp", ts.TLSAddr.String(), conf)
		must(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /f7.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		must(t, err)
		if body, _ := io.ReadAll(resp.Body); string(body) != "file 7\n" {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("renegotiation", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl not installed")
		}
		before := ts.counter("tls.cut")
		cmd := exec.Command("openssl", "s_client", "-tls1_2", "-connect", ts.TLSAddr.String(), "-CAfile", ts.certPath)
		cmd.Stdin = strings.NewReader("R\n")
		out, _ := cmd.CombinedOutput()
		if !bytes.Contains(out, []byte("RENEGOTIATING")) {
			t.Fatalf("openssl did not try to renegotiate: %q", out)
		}
		waitCounter(t, ts.testServer, "tls.cut", before+1)
	})
}

// waitCounter waits (bounded) for the counter to reach want, and fails if it
// does not equal it.
func waitCounter(t *testing.T, ts *testServer, name string, want uint64) {
	t.Helper()
	for i := 0; i < 200 && ts.counter(name) < want; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ts.counter(name); got != want {
		t.Fatalf("%s %d, want %d", name, got, want)
	}
}

// TestTLSHandshakeFlood keeps a TLS and a cleartext keep-alive connection
// busy while hundreds of handshakes (full ones, and clients stalled in the
// middle of theirs) hit the same shard: every keep-alive request completes.
// Handshakes run on the bridge goroutines, not on the shard loop.
func TestTLSHandshakeFlood(t *testing.T) {
	noLeaks(t)
	ts := startTLSServer(t, func(o *Options) {
		o.SMP = 1
		o.HeaderTimeout = 2 * time.Second
	})
	hello := clientHello(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stalled []net.Conn
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
		must(t, err)
		c.Write(hello[:len(hello)/2])
		stalled = append(stalled, c)
	}
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
				raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
				if err != nil {
					continue
				}
				c := tls.Client(raw, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1"})
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Handshake()
				c.Close()
			}
		}()
	}
	raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
	must(t, err)
	tc := tls.Client(raw, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1"})
	defer tc.Close()
	pc, err := net.DialTimeout("tcp", ts.Addr.String(), 5*time.Second)
	must(t, err)
	defer pc.Close()
	const rounds = 300
	for _, c := range []net.Conn{tc, pc} {
		c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		for i := 0; i < rounds; i++ {
			fmt.Fprintf(c, "GET /f%d.txt HTTP/1.1\r\nHost: x\r\n\r\n", i%10)
			resp, err := http.ReadResponse(br, nil)
			must(t, err)
			body, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("file %d\n", i%10); string(body) != want {
				t.Fatalf("request %d: body %q", i, body)
			}
		}
	}
	close(stop)
	wg.Wait()
	for _, c := range stalled {
		c.Close()
	}
	t.Logf("during %d keep-alive requests: %d handshakes", 2*rounds, ts.counter("tls.handshakes"))
}

// TestTLSStartErrors: a missing, unreadable or mismatched certificate or key
// stops start-up with one line and exit status 2.
func TestTLSStartErrors(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, _ := testCert(t, dir)
	other := t.TempDir()
	_, otherKey, _ := testCert(t, other)
	junk := filepath.Join(dir, "junk.pem")
	must(t, os.WriteFile(junk, []byte("not a PEM file\n"), 0o644))
	for _, args := range [][]string{
		{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", keyPath},
		{"--tls-cert", junk, "--tls-key", keyPath},
		{"--tls-cert", certPath, "--tls-key", junk},
		{"--tls-cert", certPath, "--tls-key", otherKey},
		{"--tls-cert", certPath, "--tls-key", keyPath, "--tls-ocsp", filepath.Join(dir, "missing.der")},
		{"--tls-cert", certPath},
		{"--tls-key", keyPath},
	} {
		var out bytes.Buffer
		code := Main("httpd", append([]string{"--port", "0", "--smp", "1", "--address", "127.0.0.1"}, args...), &out, nil, nil)
		if code != 2 || strings.Count(out.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, output %q: want one line and status 2", args, code, out.String())
		}
		t.Logf("%v: %s", args, strings.TrimSpace(out.String()))
	}
}

// TestTLSCurlOpenSSL: curl and openssl s_client, when installed, against the
// server: TLS 1.3 and 1.2, ALPN and a file checked whole.
func TestTLSCurlOpenSSL(t *testing.T) {
	ts := startTLSServer(t, nil)
	url := "https://" + ts.TLSAddr.String() + "/f5.txt"
	if _, err := exec.LookPath("curl"); err != nil {
		t.Log("curl not installed")
	} else {
		for _, v := range [][]string{{"--tlsv1.3"}, {"--tlsv1.2", "--tls-max", "1.2"}} {
			out, err := exec.Command("curl", append(v, "-sS", "--http1.1", "--cacert", ts.certPath, url)...).CombinedOutput()
			if err != nil || string(out) != "file 5\n" {
				t.Errorf("curl %v: %v %q", v, err, out)
			}
		}
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Log("openssl not installed")
		return
	}
	for _, v := range []string{"-tls1_3", "-tls1_2"} {
		cmd := exec.Command("openssl", "s_client", v, "-connect", ts.TLSAddr.String(), "-CAfile", ts.certPath,
			"-alpn", "http/1.1", "-status", "-verify_return_error", "-ign_eof")
		cmd.Stdin = strings.NewReader("GET /f6.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		out, err := cmd.CombinedOutput()
		ok := bytes.Contains(out, []byte("\r\n\r\nfile 6\n")) && bytes.Contains(out, []byte("ALPN protocol: http/1.1")) &&
			bytes.Contains(out, []byte("OCSP Response Status: unauthorized"))
		// 0-RTT is refused up front: the tickets allow no early data
		// (crypto/tls's server takes none, and fails a handshake that
		// brings some).
		if v == "-tls1_3" && !bytes.Contains(out, []byte("Max Early Data: 0")) {
			ok = false
		}
		if err != nil || !ok {
			t.Errorf("openssl s_client %s: %v %q", v, err, out)
		}
	}
}

// TestTLSServeNoAllocs: a keep-alive request over TLS allocates on the
// shard only the one object crypto/tls makes each time it reads records
// from its conn (an atLeastReader, in readFromUntil: it escapes into
// bytes.Buffer.ReadFrom); the record layer around it allocates nothing.
// That one cannot be avoided from outside crypto/tls: its record buffer is
// filled only there, so a record arriving when the buffer is empty costs
// it, however the conn answers Read. The client's requests are sealed
// before the measurement and its responses read as bytes, so that only the
// server's allocations count.
func TestTLSServeNoAllocs(t *testing.T) {
	ts := startTLSServer(t, func(o *Options) { o.SMP = 1 })
	raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
	must(t, err)
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &sealConn{Conn: raw}
	c := tls.Client(rc, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
	must(t, c.Handshake())
	rc.keep = true
	const warm, runs = 200, 500
	for i := 0; i < 1+warm+runs+1; i++ {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	// From here on blocking system calls on the socket (a duplicate), as
	// testutil.ServeAllocs does: AllocsPerRun runs with GOMAXPROCS 1, where
	// the Go poller would wait for the shard to be preempted.
	f, err := raw.(*net.TCPConn).File()
	must(t, err)
	defer f.Close()
	fd := int(f.Fd())
	must(t, unix.SetNonblock(fd, false))
	readFull := func(b []byte) error {
		for got := 0; got < len(b); {
			k, err := unix.Read(fd, b[got:])
			if err != nil || k == 0 {
				return fmt.Errorf("read: %d %v", k, err)
			}
			got += k
		}
		return nil
	}
	// The first response sets the length of every one: a record.
	_, err = unix.Write(fd, rc.records[0])
	must(t, err)
	hdr := make([]byte, 5)
	must(t, readFull(hdr))
	buf := make([]byte, 5+(int(hdr[3])<<8|int(hdr[4])))
	must(t, readFull(buf[5:]))
	next := 1
	var failed error
	roundTrip := func() {
		if _, err := unix.Write(fd, rc.records[next]); err != nil {
			failed = err
		}
		next++
		if err := readFull(buf); err != nil {
			failed = err
		}
	}
	for range warm {
		roundTrip()
	}
	allocs := testing.AllocsPerRun(runs, roundTrip)
	must(t, failed)
	if allocs > 1 {
		t.Fatalf("%.2f allocations per request, want at most crypto/tls's one", allocs)
	}
}

// TestTLSWreck: wreck --tls against the server: keep-alive requests, then
// full and resumed handshakes, each counted on both sides.
func TestTLSWreck(t *testing.T) {
	ts := startTLSServer(t, nil)
	run := func(args ...string) *wreck.Result {
		t.Helper()
		cfg, _, err := wreck.ParseFlags(append([]string{"--server", ts.TLSAddr.String(), "--tls", "--tls-ca", ts.certPath,
			"--duration", "20s", "--timeout", "5s", "--conn", "4"}, args...))
		must(t, err)
		res, err := wreck.Run(cfg)
		must(t, err)
		if res.Errors.Total()+res.Errors.Non2xx != 0 {
			t.Fatalf("%v: errors %+v", args, res.Errors)
		}
		return res
	}
	h0 := ts.counter("tls.handshakes")
	if res := run("--reqs", "2000"); res.Requests != 2000 || res.TLS.Handshakes != 4 {
		t.Fatalf("keep-alive: %d requests, %d handshakes: want 2000, 4", res.Requests, res.TLS.Handshakes)
	}
	if res := run("--reqs", "100", "--keepalive=false"); res.Requests != 100 || res.TLS.Handshakes != 100 || res.TLS.Resumed != 0 {
		t.Fatalf("full: %d requests, %d handshakes, %d resumed: want 100, 100, 0", res.Requests, res.TLS.Handshakes, res.TLS.Resumed)
	}
	if res := run("--reqs", "100", "--keepalive=false", "--tls-resume"); res.Requests != 100 || res.TLS.Resumed != 96 {
		t.Fatalf("resumed: %d requests, %d resumed: want 100, 96", res.Requests, res.TLS.Resumed)
	}
	waitCounter(t, ts.testServer, "tls.handshakes", h0+204)
	if r := ts.counter("tls.resumed"); r != 96 {
		t.Fatalf("server: %d resumed, want 96", r)
	}
}

// TestTLSBackpressure pipelines far more response bytes over TLS than the
// socket buffers hold without reading, checks reading stopped (the
// counter), then reads every response, in order and whole: the records
// held back while httpd pushed back are decrypted after.
func TestTLSBackpressure(t *testing.T) {
	const files, size, reqs = 4, 64 << 10, 400 // ~25 MiB of responses
	var bodies [files][]byte
	ts := startTLSServer(t, func(o *Options) {
		o.SMP = 1
		for i := range bodies {
			bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
			must(t, os.WriteFile(filepath.Join(o.Docroot, fmt.Sprintf("%d.bin", i)), bodies[i], 0o644))
		}
	})
	raw, err := net.DialTimeout("tcp", ts.TLSAddr.String(), 5*time.Second)
	must(t, err)
	defer raw.Close()
	c := tls.Client(raw, &tls.Config{RootCAs: ts.pool, ServerName: "127.0.0.1"})
	c.SetDeadline(time.Now().Add(60 * time.Second))
	must(t, c.Handshake())
	var all bytes.Buffer
	for i := 0; i < reqs; i++ {
		fmt.Fprintf(&all, "GET /%d.bin HTTP/1.1\r\nHost: x\r\n\r\n", i%files)
	}
	// One request per record, as a browser's would come.
	for b := all.Bytes(); len(b) > 0; {
		n := bytes.Index(b, []byte("\r\n\r\n")) + 4
		_, err := c.Write(b[:n])
		must(t, err)
		b = b[n:]
	}
	for deadline := time.Now().Add(10 * time.Second); ts.counter("posix.backpressure") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reading never stopped for back-pressure: %d requests, %d bytes out, %d in", ts.counter("http.requests"), ts.counter("posix.bytes_out"), ts.counter("posix.bytes_in"))
		}
	}
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < reqs; i++ {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("response %d: %v (%d requests, %d bytes out, %d in, back-pressure %d)", i, err, ts.counter("http.requests"),
				ts.counter("posix.bytes_out"), ts.counter("posix.bytes_in"), ts.counter("posix.backpressure"))
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(body, bodies[i%files]) {
			t.Fatalf("response %d: %d bytes, err %v", i, len(body), err)
		}
	}
}
