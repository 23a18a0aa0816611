package cgiprog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"percore/specweb/fileset"
)

// writeFile writes the one file the test asks for.
func writeFile(t *testing.T, root string) error {
	t.Helper()
	p := filepath.Join(root, fileset.FilePath(2, 0, 4))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, fileset.AppendFile(nil, 2, 0, 4), 0o644)
}

// TestServe: the program's side, given the CGI environment.
func TestServe(t *testing.T) {
	root := t.TempDir()
	if err := writeFile(t, root); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"/file_set/dir00002/class0_4", "Content-Type: text/html\r\n\r\n" + string(fileset.AppendPagePrefix(nil, "198.18.0.2", fileset.CGIPath, "/file_set/dir00002/class0_4")) + string(fileset.AppendFile(nil, 2, 0, 4)) + fileset.PageSuffix},
		{"/file_set/dir00002/class0_4x", "Status: 404"},
		{"/file_set/dir-0002/class0_4", "Status: 404"},
		{"/file_set/dir00002/class4_0", "Status: 404"},
		{"/../etc/passwd", "Status: 404"},
	} {
		env := map[string]string{"DOCUMENT_ROOT": root, "QUERY_STRING": tc.query, "SCRIPT_NAME": fileset.CGIPath, "REMOTE_ADDR": "198.18.0.2"}
		var out bytes.Buffer
		if err := Serve(func(k string) string { return env[k] }, &out); err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		if !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("%s: %.100q, want %q first", tc.query, out.String(), tc.want)
		}
	}
}
