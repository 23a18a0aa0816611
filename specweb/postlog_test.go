package specweb

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
)

func TestRecordFormat(t *testing.T) {
	p := Post{Time: 1700000000, Conn: 40123, Dir: 12, Class: 1, Num: 3, Client: 7, User: 10042}
	got := string(p.appendRecord(nil, 5))
	want := "         5 1700000000      40123 00012 1 3          7      10042 /file_set/dir00012/class1_3"
	if len(got) != RecordLen || got[:len(want)] != want || got[RecordLen-1] != '\n' {
		t.Fatalf("record %q (%d bytes), want %q padded to %d", got, len(got), want, RecordLen)
	}
}

// TestPostLogConcurrent posts from several goroutines at once (as several
// shards do) while a reader takes snapshots: every snapshot is a prefix of
// whole records in sequence order, and the final log holds every post once.
func TestPostLogConcurrent(t *testing.T) {
	const writers, each = 4, 3000 // crosses several chunks
	var l PostLog
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				p := Post{Time: int64(k), Dir: g, Client: g, User: FirstUser + k}
				if _, ok := l.Append(&p); !ok {
					t.Error("log full")
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for snapshots := 0; ; snapshots++ {
		select {
		case <-done:
		default:
			checkLog(t, l.AppendTo(nil), -1)
			continue
		}
		break
	}
	checkLog(t, l.AppendTo(nil), writers*each)
}

// checkLog checks records are whole and numbered 0, 1, ... in order, that no
// (client, user) pair repeats, and, for want >= 0, that there are want of
// them with each writer's posts all there.
func checkLog(t *testing.T, log []byte, want int) {
	t.Helper()
	if len(log)%RecordLen != 0 {
		t.Fatalf("log of %d bytes: not whole records", len(log))
	}
	seen := map[[2]int]bool{}
	for i := 0; i < len(log)/RecordLen; i++ {
		f := bytes.Fields(log[i*RecordLen : (i+1)*RecordLen])
		if len(f) != 9 || log[(i+1)*RecordLen-1] != '\n' {
			t.Fatalf("record %d torn: %q", i, log[i*RecordLen:(i+1)*RecordLen])
		}
		seq, _ := strconv.Atoi(string(f[0]))
		client, _ := strconv.Atoi(string(f[6]))
		user, _ := strconv.Atoi(string(f[7]))
		if seq != i {
			t.Fatalf("record %d has sequence %d", i, seq)
		}
		if seen[[2]int{client, user}] {
			t.Fatalf("post client %d user %d logged twice", client, user)
		}
		seen[[2]int{client, user}] = true
	}
	if want >= 0 && len(seen) != want {
		t.Fatalf("%d records, want %d", len(seen), want)
	}
}

func TestPostLogAllocs(t *testing.T) {
	var l PostLog
	p := Post{Dir: 1, Class: 2, Num: 3}
	l.Append(&p) // the first chunk
	if n := testing.AllocsPerRun(500, func() { l.Append(&p) }); n != 0 {
		t.Errorf("Append allocates %v times within a chunk", n)
	}
}
