package specsearch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SPECweb99_SSL (--tls): the same workload over TLS, specweb serve with a
// self-signed ECDSA P-256 certificate for the server's address, wreck
// validating it, TLS 1.3 with an X25519 key exchange (crypto/tls then
// settles on AES-128-GCM on a CPU with AES instructions), a full handshake
// on each new connection (no session resumption).

// tlsFiles writes the certificate and key for host into dir.
func tlsFiles(dir, host string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "percore bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP(host)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", fmt.Errorf("certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// publishedSSL are Zeus 4.2's SPECweb99_SSL results, from SPEC's published
// SPECweb99_SSL results (www.spec.org/web99ssl/results/).
var publishedSSL = []struct {
	server, machine string
	cores, conns    int
}{
	{"Zeus 4.2", "2x AMD Opteron 248", 2, 2240},
	{"Zeus 4.2", "16x HP PA-8700", 16, 4700},
}
