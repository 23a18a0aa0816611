// Package testutil holds the helpers that percore's tests share: skips that
// say why, frames built with gopacket (independently of netstack's own
// encoders), and file trees written for a test. It is imported by tests only,
// and imports no percore package, so any package's own tests may use it.
package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
)

// NeedRoot skips t when the process is not root, giving why root is needed
// (CI runs as root, so there the test runs).
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s", why)
	}
}

// SkipUnless skips t with reason as the explanation when reason is not nil:
// SkipUnless(t, afxdp.Supported()) for tests that open AF_XDP sockets.
func SkipUnless(t testing.TB, reason error) {
	t.Helper()
	if reason != nil {
		t.Skip(reason)
	}
}

// Must fails t at once on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Serialize builds a frame from gopacket layers with lengths and checksums
// computed (gopacket pads Ethernet frames to 60 bytes).
func Serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// WriteTree writes files (slash-separated path -> contents, directories made
// as needed) into a new temporary directory, removed after the test, and
// returns the directory.
func WriteTree(t testing.TB, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		Must(t, os.WriteFile(p, body, 0o644))
	}
	return dir
}
