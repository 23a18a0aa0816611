package wreck

import (
	"crypto/tls"

	"percore/internal/shardtls"
	"percore/shard"
)

// TLS on a client shard (the native client and the SPECweb99 client): the
// handshake off the shard, the record layer on it, as percore's server does
// it (package shardtls). Each connection's handshake runs on a helper
// goroutine; its flights reach the shard through the shard's mailbox and
// are sent from the connection's ciphertext queue; once it is done, the
// shard feeds the records that arrive to crypto/tls and reads their
// plaintext, and encrypts its requests into the queue.

// tlsBox is one client shard's TLS: the mailbox its handshakes post to,
// and the scratch buffer records are decrypted into. Owned by the shard.
type tlsBox struct {
	*shardtls.Box
	plain []byte // decrypted bytes, valid until the next read
}

// tlsPlainBuf is the plaintext read out of crypto/tls at a time: a record's.
const tlsPlainBuf = 16 << 10

// newTLSBox registers a mailbox on sh.
func newTLSBox(sh *shard.Shard) (*tlsBox, error) {
	b, err := shardtls.NewBox(sh, shardtls.Options{})
	if err != nil {
		return nil, err
	}
	return &tlsBox{Box: b, plain: make([]byte, tlsPlainBuf)}, nil
}

// start begins the client handshake of a new connection on a helper
// goroutine; the shard carries its flights.
func (b *tlsBox) start(owner shardtls.Owner, conf *tls.Config) *shardtls.Conn {
	return b.Start(owner, conf, -1)
}

// read returns the next plaintext decrypted from what was fed to t, valid
// until the next read; nil with a nil error when it needs more ciphertext.
// Errors are shardtls.Conn.Read's.
func (b *tlsBox) read(t *shardtls.Conn) ([]byte, error) {
	n, err := t.Read(b.plain)
	if n == 0 && err == nil {
		return nil, nil
	}
	return b.plain[:n], err
}

// close ends the handshakes still in progress, waits for their helpers and
// closes the mailbox. The shard calls it last, once its connections are
// released.
func (b *tlsBox) close() {
	b.Close()
	b.Wait()
}
