package specweb

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateResume generates the smallest set (10 directories), then
// again after damaging it: only the damaged files are written, and the
// result is byte for byte what the first run wrote.
func TestGenerateResume(t *testing.T) {
	root := t.TempDir()
	var last Progress
	if err := Generate(root, 10, 1, 20, func(p Progress) { last = p }); err != nil {
		t.Fatal(err)
	}
	if last.Dir != 10 || last.Dirs != 10 || last.Written != 10*DirBytes() || last.Skipped != 0 {
		t.Fatalf("progress %+v", last)
	}
	name := filepath.Join(root, FilePath(9, 3, 8))
	first, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(first, AppendFile(nil, 9, 3, 8)) {
		t.Fatalf("%s: %v, or not AppendFile's bytes", name, err)
	}
	pers, _ := os.ReadFile(filepath.Join(root, PersonalityFile))
	if len(pers) != 20*personalityLen {
		t.Fatalf("User.Personality %d bytes", len(pers))
	}

	// A truncated file (an interrupted writer would leave a dotted temporary
	// instead, but a truncated one must be redone too) and a missing one.
	if err := os.Truncate(name, 100); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, FilePath(0, 0, 0)))
	os.WriteFile(filepath.Join(root, "file_set/dir00000/.class0_0.tmp"), []byte("partial"), 0o644)
	if err := Generate(root, 10, 1, 20, func(p Progress) { last = p }); err != nil {
		t.Fatal(err)
	}
	redone := int64(FileSize(3, 8) + FileSize(0, 0))
	if last.Written != redone || last.Skipped != 10*DirBytes()-redone {
		t.Fatalf("resume progress %+v, want %d written", last, redone)
	}
	again, _ := os.ReadFile(name)
	if !bytes.Equal(again, first) {
		t.Fatal("resumed file differs")
	}
	if _, err := os.Stat(filepath.Join(root, "file_set/dir00000/.class0_0.tmp")); err == nil {
		t.Error("the temporary was left behind")
	}
	if a, err := Load(root, Config{}); err != nil || a.Dirs() != 10 {
		t.Fatalf("Load: %v", err)
	}
	if err := Generate(root, 9, 1, 20, nil); err == nil {
		t.Error("Generate took fewer directories than the ads need")
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(t.TempDir(), Config{}); err == nil || !errors.Is(err, ErrNoFileSet) {
		t.Fatalf("Load of an empty directory: %v", err)
	}
}
