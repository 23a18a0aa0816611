package wreck

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"percore/lab"
	"percore/server"
	pshard "percore/shard"
)

// End to end over TLS: native wreck --tls on the client end of a 2-queue
// lab against percore's TLS server (crypto/tls, handshakes on helpers) on
// the server end, on either server stack.

// writeTestCert writes selfSigned's certificate for ip and its key, and
// returns their paths.
func writeTestCert(t *testing.T, ip netip.Addr) (cert, key string) {
	t.Helper()
	der, k := selfSigned(t, ip.AsSlice())
	kder, err := x509.MarshalECPrivateKey(k)
	must(t, err)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return cert, key
}

// startTLSServer is percore's HTTPS server on pair's server end (root
// namespace) on stack ("native" or "posix"), port 443, one shard.
func startTLSServer(t *testing.T, pair *lab.NativePair, stack string, cpu int, cert, key string) *nativeServer {
	t.Helper()
	args := []string{"--network-stack", stack, "--port", "443", "--cpuset", pshard.FormatCPUs([]int{cpu}),
		"--stop-timeout", "2s", "--tls-cert", cert, "--tls-key", key}
	if stack == "native" {
		args = append(args, "--iface", pair.ServerIf, "--host-ipv4-addr", pair.ServerIP.String())
	} else {
		// The kernel's stack answers for the server's address.
		must(t, lab.AddAddr(nil, pair.ServerIf, netip.PrefixFrom(pair.ServerIP, 24)))
		must(t, lab.DisableOffloads(nil, pair.ServerIf))
		args = append(args, "--address", pair.ServerIP.String())
	}
	o, err := server.ParseFlags(args, nil)
	must(t, err)
	o.Native.Logf = t.Logf
	srv, err := server.Start(o, nil)
	must(t, err)
	s := &nativeServer{g: srv, addr: netip.AddrPortFrom(pair.ServerIP, 443)}
	t.Cleanup(func() {
		srv.Stop()
		select {
		case <-srv.Done():
		case <-time.After(20 * time.Second):
			t.Errorf("TLS server did not stop within 20s")
		}
	})
	return s
}

// TestNativeTLS: native wreck --tls against percore's TLS server on both
// server stacks: keep-alive requests, full and resumed handshakes with
// --keepalive=false, the certificate validated (refused without its CA)
// or not (--tls-insecure); no handshake helper outlives a run.
func TestNativeTLS(t *testing.T) {
	requireNative(t)
	cpus := twoCPUs(t)
	for _, stack := range []string{"posix", "native"} {
		t.Run(stack, func(t *testing.T) {
			pair := newNativePair(t, lab.Config{Prefix: "wt", Queues: 1, ServerRoot: true})
			cert, key := writeTestCert(t, pair.ServerIP)
			srv := startTLSServer(t, pair, stack, cpus[1], cert, key)
			// Each run has source ports of its own: the server keeps the
			// last run's connections in TIME-WAIT, and a SYN that meets one
			// waits for a retransmission.
			ports := 40000
			run := func(t *testing.T, extra ...string) *Result {
				t.Helper()
				ports += 1000
				args := append(pair.NativeClientArgs(), "--netns", pair.ClientNS.Name, "--server", srv.addr.String(),
					"--source-ports", fmt.Sprintf("%d-%d", ports, ports+999),
					"--smp", "1", "--cpuset", pshard.FormatCPUs(cpus[:1]), "--duration", "20s", "--timeout", "5s", "--tls")
				cfg, _, err := ParseFlags(append(args, extra...))
				must(t, err)
				cfg.Progress = tlog{t}
				res, err := Run(cfg)
				must(t, err)
				t.Logf("%d requests, %d handshakes (%d resumed, %d failed), errors %+v",
					res.Requests, res.TLS.Handshakes, res.TLS.Resumed, res.TLS.HandshakeErrors, res.Errors)
				if stacks := helpers(); stacks != "" {
					t.Fatalf("handshake helpers left after the run:\n%s", stacks)
				}
				return res
			}
			clean := func(t *testing.T, res *Result, reqs, handshakes, resumed uint64) {
				t.Helper()
				if res.Requests != reqs || res.Errors.Total()+res.Errors.Non2xx != 0 || res.TLS.Handshakes != handshakes || res.TLS.Resumed != resumed {
					t.Errorf("%d requests, errors %+v, %d handshakes, %d resumed: want %d, none, %d, %d",
						res.Requests, res.Errors, res.TLS.Handshakes, res.TLS.Resumed, reqs, handshakes, resumed)
				}
			}
			t.Run("keep-alive", func(t *testing.T) {
				clean(t, run(t, "--tls-ca", cert, "--conn", "4", "--reqs", "2000", "--pipeline", "2"), 2000, 4, 0)
			})
			t.Run("full handshakes", func(t *testing.T) {
				clean(t, run(t, "--tls-ca", cert, "--conn", "4", "--reqs", "200", "--keepalive=false"), 200, 200, 0)
			})
			t.Run("resumed handshakes", func(t *testing.T) {
				// Each slot's first handshake is a full one.
				clean(t, run(t, "--tls-ca", cert, "--conn", "4", "--reqs", "200", "--keepalive=false", "--tls-resume"), 200, 200, 196)
			})
			t.Run("insecure", func(t *testing.T) {
				clean(t, run(t, "--tls-insecure", "--tls-curves", "p256", "--conn", "2", "--reqs", "100"), 100, 2, 0)
			})
			t.Run("unknown CA", func(t *testing.T) {
				// crypto/tls refuses the certificate: the connect fails
				// and the slot backs off and tries again until the end.
				res := run(t, "--conn", "2", "--reqs", "1", "--duration", "500ms")
				if res.Requests != 0 || res.TLS.HandshakeErrors == 0 || res.Errors.Connect < res.TLS.HandshakeErrors {
					t.Errorf("%d requests, %d handshake errors, %d connect errors: want 0, above 0, at least as many",
						res.Requests, res.TLS.HandshakeErrors, res.Errors.Connect)
				}
			})
			st := pshard.Merge(srv.g.Stats())
			t.Logf("server: %d handshakes, %d resumed, %d failed", st.Get("tls.handshakes"), st.Get("tls.resumed"), st.Get("tls.failed"))
			if st.Get("tls.resumed") < 196 {
				t.Errorf("the server resumed %d sessions, want at least 196", st.Get("tls.resumed"))
			}
		})
	}
}

// helpers returns the stacks of the goroutines running a client handshake
// ("" if none). The server under test runs in this process too, on the
// same package's helpers: its handshakes (serverHandshake) are its own to
// end, at their timeout or when it sees the close.
func helpers() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "shardtls.(*Conn).handshake") && strings.Contains(g, "clientHandshake") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
