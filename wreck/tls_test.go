package wreck

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tlsTestServer is an in-process HTTPS server on 127.0.0.1 (Go's crypto/tls
// over a listener, a fixed response) that counts handshakes, resumed ones
// and requests.
type tlsTestServer struct {
	ln                  net.Listener
	caPath              string
	handshakes, resumed atomic.Int64
	reqs                atomic.Int64
	wg                  sync.WaitGroup
}

// selfSigned is a self-signed ECDSA P-256 certificate for ip (DER) and
// its key; the certificate is its own CA.
func selfSigned(t *testing.T, ip net.IP) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wreck test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	return der, key
}

func startTLSTestServer(t *testing.T) *tlsTestServer {
	t.Helper()
	der, key := selfSigned(t, net.IPv4(127, 0, 0, 1))
	s := &tlsTestServer{caPath: filepath.Join(t.TempDir(), "ca.pem")}
	must(t, os.WriteFile(s.caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	conf := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(tls.Server(c, conf))
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *tlsTestServer) serve(c *tls.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if c.Handshake() != nil {
		return
	}
	s.handshakes.Add(1)
	if c.ConnectionState().DidResume {
		s.resumed.Add(1)
	}
	br := bufio.NewReader(c)
	for {
		r, err := readReq(br)
		if err != nil {
			return
		}
		s.reqs.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
		if r.close {
			return
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTLSRun: wreck --tls against an in-process server: keep-alive
// requests, full and resumed handshakes with --keepalive=false, the
// certificate validated (refused without its CA) or not (--tls-insecure).
func TestTLSRun(t *testing.T) {
	s := startTLSTestServer(t)
	run := func(t *testing.T, args ...string) *Result {
		t.Helper()
		cfg, _, err := ParseFlags(append([]string{"--server", s.ln.Addr().String(), "--tls", "--duration", "10s", "--timeout", "5s"}, args...))
		must(t, err)
		res, err := Run(cfg)
		must(t, err)
		return res
	}
	t.Run("keep-alive", func(t *testing.T) {
		h0, r0 := s.handshakes.Load(), s.reqs.Load()
		res := run(t, "--tls-ca", s.caPath, "--conn", "4", "--reqs", "400", "--pipeline", "2")
		// A worker the scheduler starts after the others took the whole
		// budget never connects: at most one handshake a connection.
		if res.Requests != 400 || res.Errors.Total()+res.Errors.Non2xx != 0 || res.TLS.Handshakes < 1 || res.TLS.Handshakes > 4 {
			t.Fatalf("%d requests, errors %+v, %d handshakes: want 400, none, 1 to 4", res.Requests, res.Errors, res.TLS.Handshakes)
		}
		if h, r := s.handshakes.Load()-h0, s.reqs.Load()-r0; h != int64(res.TLS.Handshakes) || r != 400 {
			t.Fatalf("server saw %d handshakes and %d requests, want %d and 400", h, r, res.TLS.Handshakes)
		}
	})
	t.Run("full handshakes", func(t *testing.T) {
		res := run(t, "--tls-ca", s.caPath, "--conn", "2", "--reqs", "40", "--keepalive=false")
		if res.Requests != 40 || res.TLS.Handshakes != 40 || res.TLS.Resumed != 0 || res.Errors.Total() != 0 {
			t.Fatalf("%d requests, %d handshakes, %d resumed, errors %+v: want 40, 40, 0, none", res.Requests, res.TLS.Handshakes, res.TLS.Resumed, res.Errors)
		}
	})
	t.Run("resumed handshakes", func(t *testing.T) {
		r0 := s.resumed.Load()
		res := run(t, "--tls-ca", s.caPath, "--conn", "2", "--reqs", "40", "--keepalive=false", "--tls-resume")
		// Each connection's first handshake is a full one.
		if res.Requests != 40 || res.TLS.Handshakes != 40 || res.TLS.Resumed != 38 || s.resumed.Load()-r0 != 38 {
			t.Fatalf("%d requests, %d handshakes, %d resumed (server %d): want 40, 40, 38", res.Requests, res.TLS.Handshakes, res.TLS.Resumed, s.resumed.Load()-r0)
		}
	})
	t.Run("unknown CA", func(t *testing.T) {
		res := run(t, "--conn", "1", "--reqs", "1", "--duration", "300ms")
		// A connect cut by the run's end may count too.
		if res.Requests != 0 || res.TLS.HandshakeErrors == 0 || res.Errors.Connect < res.TLS.HandshakeErrors {
			t.Fatalf("%d requests, %d handshake errors, %d connect errors: want 0, above 0, at least as many", res.Requests, res.TLS.HandshakeErrors, res.Errors.Connect)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		res := run(t, "--tls-insecure", "--tls-curves", "x25519,p256", "--conn", "1", "--reqs", "10")
		if res.Requests != 10 || res.Errors.Total() != 0 {
			t.Fatalf("%d requests, errors %+v", res.Requests, res.Errors)
		}
		var out strings.Builder
		must(t, res.WriteText(&out))
		if !strings.Contains(out.String(), "tls: 1 handshakes (0 resumed)") {
			t.Fatalf("text report lacks the TLS line:\n%s", out.String())
		}
	})
}

// TestTLSFlags: the --tls flags that need --tls, or that contradict others.
func TestTLSFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--tls-insecure"},
		{"--tls-resume"},
		{"--tls", "--tls-insecure", "--tls-ca", "ca.pem"},
		{"--tls", "--rate", "100"},
		{"--tls", "--check-seq"},
		{"--tls", "--tls-curves", "x448"},
		{"--tls-curves", "x25519"},
	} {
		if _, _, err := ParseFlags(append([]string{"--server", "127.0.0.1:1"}, args...)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line", args, err)
		}
	}
}
