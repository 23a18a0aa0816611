package specweb

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLogCopy copies a log across chunk boundaries in two steps, then a
// new log (a Reset) starts the file again.
func TestLogCopy(t *testing.T) {
	name := filepath.Join(t.TempDir(), "post.log")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &logCopy{f: f}
	var l PostLog
	check := func(l *PostLog, records int) {
		t.Helper()
		if err := c.update(l); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(name)
		if want := l.AppendTo(nil); !bytes.Equal(got, want) || len(got) != records*RecordLen {
			t.Fatalf("file %d bytes, want the %d records of the log", len(got), records)
		}
	}
	for k := range 1000 {
		l.Append(&Post{Client: k})
	}
	check(&l, 1000)
	for k := range 1500 {
		l.Append(&Post{Client: k})
	}
	check(&l, 2500)
	var l2 PostLog
	l2.Append(&Post{Client: 1})
	check(&l2, 1)
}

// TestPersist: closing stop copies what was logged.
func TestPersist(t *testing.T) {
	a := &App{cfg: Config{Seed: 1}}
	a.Reset(5)
	name := filepath.Join(t.TempDir(), "post.log")
	stop := make(chan struct{})
	done := make(chan error)
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("an older log")
	go func() { done <- a.Persist(f, time.Hour, stop) }()
	for k := range 3 {
		a.Log().Append(&Post{Client: k})
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(name)
	if !bytes.Equal(got, a.Log().AppendTo(nil)) || len(got) != 3*RecordLen {
		t.Fatalf("persisted %d bytes, want 3 records", len(got))
	}
}
