package server

import (
	"crypto/tls"
	"fmt"
	"os"
)

// TLSFiles name the PEM files of the server's certificate and key, and an
// optional DER OCSP response to staple.
type TLSFiles struct {
	Cert, Key, OCSP string
}

// LoadTLS reads the certificate chain and key (RSA or ECDSA) and returns the
// server's TLS configuration: TLS 1.3 and 1.2 with AEAD suites and forward
// secrecy only, ALPN http/1.1, and session tickets. crypto/tls makes the
// ticket keys at first use and rotates them itself (a new key a day, each
// valid for a week); the configuration is shared read-only by every
// connection's handshake. Errors are one line.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls certificate %q, key %q: %w", f.Cert, f.Key, err)
	}
	if f.OCSP != "" {
		staple, err := os.ReadFile(f.OCSP)
		if err != nil {
			return nil, fmt.Errorf("ocsp staple: %w", err)
		}
		if len(staple) == 0 {
			return nil, fmt.Errorf("ocsp staple %q: file is empty", f.OCSP)
		}
		cert.OCSPStaple = staple
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		// TLS 1.2 only: TLS 1.3's suites are all modern and not configurable.
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: []string{"http/1.1"},
		// Full-size records from the first byte: a shard seals a response
		// whole, one record per write to crypto/tls; smaller records
		// would cost more seals and more writes (on posix).
		DynamicRecordSizingDisabled: true,
	}, nil
}
