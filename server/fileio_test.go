package server

import (
	"testing"

	"golang.org/x/sys/unix"

	"percore/httpd"
)

// TestFileIOFull: jobs past the channel wait in the overflow list, which
// reports full at overJobs.
func TestFileIOFull(t *testing.T) {
	f := &fileIO{jobs: make(chan *httpd.FileJob, 1)} // no workers: nothing is taken
	for i := range overJobs + 1 {
		if f.Full() {
			t.Fatalf("full after %d jobs, want %d", i, overJobs+1)
		}
		f.Submit(&httpd.FileJob{})
	}
	if !f.Full() || len(f.over) != overJobs {
		t.Fatalf("full %v with %d waiting over the channel", f.Full(), len(f.over))
	}
}

// Streams hold at most a quarter of the process's descriptors open, shared
// among the shards, and never more than httpd's default per shard: 16
// shards under the common limit of 20,000 would otherwise hold 32,768.
func TestStreamShare(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		shards int
		want   int
	}{
		{20000, 2, httpd.DefaultStreamFiles},
		{20000, 16, 312},
		{1024, 1, 256},
		{1 << 20, 64, httpd.DefaultStreamFiles},
		{unix.RLIM_INFINITY, 8, httpd.DefaultStreamFiles},
		{3, 1, 0},
	} {
		if got := streamShare(c.nofile, c.shards); got != c.want {
			t.Errorf("streamShare(%d, %d) = %d, want %d", c.nofile, c.shards, got, c.want)
		}
	}
}
