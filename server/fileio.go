package server

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"percore/httpd"
	"percore/shard"
)

// fileWorkers is how many goroutines read files for one shard's httpd: a few
// reads in flight let the disk reorder them, and a slow one does not hold
// up the rest.
const fileWorkers = 4

// Jobs wait in a channel of queuedJobs, then in over up to overJobs (a
// stream's next chunk past that too): beyond, new requests that need a job
// are answered 503 (httpd.FileIO.Full) rather than queued behind a disk that
// cannot keep up, so a shard's memory and its clients' waits stay bounded.
// Reading input goes on: every connection waits for one job at most.
const (
	queuedJobs = 1024
	overJobs   = 1024
)

// fileIO is one httpd.Server's httpd.FileIO: worker goroutines that run file
// jobs off the shard's thread (they block in open and pread), and an eventfd
// in the shard's epoll that wakes the shard when jobs are done. The shard
// hands jobs over on a channel (never blocking: a full channel's jobs wait in
// over) and takes finished ones back under a mutex, once per wake-up. Only
// a cache miss or a streamed chunk the page cache lacks (or a stream's
// first, which opens the file) comes this way, never a hit.
type fileIO struct {
	srv  *httpd.Server
	jobs chan *httpd.FileJob
	over []*httpd.FileJob // jobs the channel had no room for; shard only
	efd  int
	wg   sync.WaitGroup

	mu   sync.Mutex
	done []*httpd.FileJob // finished, for the shard
	took []*httpd.FileJob // the shard's batch, swapped with done
}

// streamFiles is each of shards' share of the files streams may hold open:
// a quarter of the process's descriptors (RLIMIT_NOFILE, which Go raises to
// its hard limit at start), at most httpd's default. The rest stay for
// connections, listeners, eventfds and the files a chunk's job opens.
func streamFiles(shards int) int {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return httpd.DefaultStreamFiles
	}
	return streamShare(lim.Cur, shards)
}

// streamShare is streamFiles for a descriptor limit of nofile.
func streamShare(nofile uint64, shards int) int {
	if nofile == unix.RLIM_INFINITY || shards <= 0 {
		return httpd.DefaultStreamFiles
	}
	return int(min(nofile/4/uint64(shards), httpd.DefaultStreamFiles))
}

// attachFileIO gives srv a fileIO on shard sh: srv reads files through it
// from now on, and its streams hold at most files open. Call from the
// shard's setup; the shard closes it when it stops.
func attachFileIO(sh *shard.Shard, srv *httpd.Server, files int) error {
	srv.SetStreamFiles(files)
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("file reader: eventfd: %w", err)
	}
	f := &fileIO{srv: srv, jobs: make(chan *httpd.FileJob, queuedJobs), efd: efd}
	if err := sh.AddFD(efd, unix.EPOLLIN, sh.AddSource(f), 0); err != nil {
		unix.Close(efd)
		return err
	}
	for range fileWorkers {
		f.wg.Add(1)
		go f.work()
	}
	srv.SetFileIO(f)
	sh.AddStopper(f)
	return nil
}

// Submit implements httpd.FileIO.
func (f *fileIO) Submit(j *httpd.FileJob) {
	if len(f.over) == 0 {
		select {
		case f.jobs <- j:
			return
		default:
		}
	}
	f.over = append(f.over, j)
}

// Full implements httpd.FileIO.
func (f *fileIO) Full() bool { return len(f.over) >= overJobs }

func (f *fileIO) work() {
	defer f.wg.Done()
	one := [8]byte{1}
	for j := range f.jobs {
		j.Run()
		f.mu.Lock()
		f.done = append(f.done, j)
		first := len(f.done) == 1
		f.mu.Unlock()
		if first { // later ones find the eventfd already readable
			unix.Write(f.efd, one[:])
		}
	}
}

// Events takes the finished jobs back to httpd, on the shard.
func (f *fileIO) Events(_ []shard.Event, now time.Time) {
	var b [8]byte
	unix.Read(f.efd, b[:])
	f.mu.Lock()
	f.done, f.took = f.took[:0], f.done
	f.mu.Unlock()
	for i, j := range f.took {
		f.took[i] = nil
		f.srv.Complete(j, now)
	}
	for len(f.over) > 0 {
		select {
		case f.jobs <- f.over[0]:
			f.over[0] = nil
			f.over = f.over[1:]
			continue
		default:
		}
		break
	}
}

// Drain and Drained implement shard.Stopper: jobs in flight finish on their
// own; the connections waiting for them drain with the stack.
func (f *fileIO) Drain(time.Time) {}
func (f *fileIO) Drained() bool   { return true }

// Close stops the workers once the jobs handed over are done (the stack has
// closed every connection; what they read is dropped, and the files they
// hold closed) and closes the eventfd.
func (f *fileIO) Close() {
	close(f.jobs)
	f.wg.Wait()
	for _, j := range f.done {
		f.srv.Drop(j)
	}
	for _, j := range f.over {
		f.srv.Drop(j)
	}
	unix.Close(f.efd)
}
