package specweb

import (
	"bytes"
	"testing"
)

func TestDirsFormula(t *testing.T) {
	for _, c := range []struct{ conns, dirs int }{
		{0, 25}, {1, 25}, {2, 26}, {20, 38}, {10507, 6914},
	} {
		if got := Dirs(c.conns); got != c.dirs {
			t.Errorf("Dirs(%d) = %d, want %d", c.conns, got, c.dirs)
		}
	}
	if got := DirBytes(); got != 5119484 {
		t.Errorf("DirBytes() = %d, want 5,119,484", got)
	}
	// The published file set for 10,507 connections: about 33,740 MB (of 2^20 bytes).
	if mb := int64(Dirs(10507)) * DirBytes() >> 20; mb < 33700 || mb > 33780 {
		t.Errorf("file set for 10,507 connections = %d MB, want about 33,740", mb)
	}
}

func TestFileSizes(t *testing.T) {
	want := [Classes][FilesPerDir]int{
		{102, 204, 307, 409, 512, 614, 716, 819, 921},
		{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216},
		{10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160},
		{102400, 204800, 307200, 409600, 512000, 614400, 716800, 819200, 921600},
	}
	for c := range Classes {
		for y := range FilesPerDir {
			if got := FileSize(c, y); got != want[c][y] {
				t.Errorf("FileSize(%d, %d) = %d, want %d", c, y, got, want[c][y])
			}
		}
	}
}

func TestAppendFile(t *testing.T) {
	for c := range Classes {
		for y := range FilesPerDir {
			f := AppendFile(nil, 12, c, y)
			if len(f) != FileSize(c, y) {
				t.Fatalf("class%d_%d: %d bytes, want %d", c, y, len(f), FileSize(c, y))
			}
			if !bytes.Equal(f, AppendFile(nil, 12, c, y)) {
				t.Fatalf("class%d_%d: not deterministic", c, y)
			}
			hdr := "SPECweb99 " + FilePath(12, c, y) + " "
			if !bytes.HasPrefix(f, []byte(hdr)) {
				t.Fatalf("class%d_%d starts %q, want %q", c, y, f[:len(hdr)], hdr)
			}
			if n := bytes.Count(f, []byte(tagOpen)); n != Tags(c, y) {
				t.Errorf("class%d_%d has %d tags, want %d", c, y, n, Tags(c, y))
			}
			if got := len(findTags(f)); got != Tags(c, y) {
				t.Errorf("class%d_%d: findTags found %d, want %d", c, y, got, Tags(c, y))
			}
		}
	}
	if a, b := AppendFile(nil, 1, 0, 0), AppendFile(nil, 2, 0, 0); bytes.Equal(a[40:], b[40:]) {
		t.Error("two files have the same filler")
	}
	if AdPath(0) != "/file_set/dir00000/class0_0" || AdPath(359) != "/file_set/dir00009/class3_8" ||
		AdPath(47) != "/file_set/dir00001/class1_2" {
		t.Errorf("AdPath: %s %s %s", AdPath(0), AdPath(359), AdPath(47))
	}
}
