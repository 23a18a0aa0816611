package server

import (
	"testing"

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
