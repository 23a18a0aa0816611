package httpd

import (
	"errors"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileIO runs a Server's file jobs off the shard's thread: Submit hands a job
// over without blocking; a thread that may block calls its Run, and the job
// comes back to the shard, which passes it to Server.Complete. A stack
// provides one per Server (a few goroutines and an eventfd in the shard's
// epoll); without one the Server reads files inline, which suits tests and
// tools but blocks the caller.
type FileIO interface {
	Submit(j *FileJob)
	// Full reports that as many jobs wait as the FileIO will hold: a request
	// that needs a new job is answered 503 rather than queued (the next
	// chunk of a response already streaming is submitted all the same).
	Full() bool
}

// FileJob is one piece of file-system work: resolving a path (open, stat, a
// small file read whole) or reading one chunk of a streamed file; or a
// handler's Job (Offload), which the FileIO runs the same way. Run touches
// nothing of the shard, so any goroutine may run it; everything else about
// the job belongs to the shard that made it.
type FileJob struct {
	srv   *Server
	epoch uint64 // the site's reload epoch when the job was made
	work  Job    // a handler's job (Offload); its one waiter is the connection

	// resolving a path
	key     string // the clean request path
	whole   bool   // read a file too large for the cache whole, up to maxWholeFile
	waiters []waiter
	entry   *cacheEntry

	// reading a chunk of file into buf at off, after the n bytes read
	// already (on the shard, from the page cache)
	c    *Conn
	gen  uint32 // c's generation when the job was made
	file *staticFile
	off  int64
	buf  []byte
	n    int
	err  error
	keep bool // the file stays open in fd for the stream's later chunks
	fd   int  // the file kept open, or -1; the shard closes it (Server.dropFile)
}

// waiter is a connection whose request waits for a path to resolve.
type waiter struct {
	c   *Conn
	gen uint32
}

// errChanged means a streamed file changed while it was sent: its header has
// gone out with the old length, so the connection is closed.
var errChanged = errors.New("file changed while being sent")

// Run does the job's file-system work; it may block.
func (j *FileJob) Run() {
	if j.work != nil {
		j.work.Run()
	} else if j.file != nil {
		j.readChunk()
	} else {
		j.resolve()
	}
}

// resolve finds what the clean path key names below the docroot: a file (read
// whole when the cache may keep it), a directory that redirects, or nothing.
func (j *FileJob) resolve() {
	site := j.srv.site
	key := j.key
	rel := key[1:]
	slash := strings.HasSuffix(key, "/")
	if slash {
		rel += "index.html"
	}
	j.entry = newEntry(key, entMissing, nil)
	fd, err := site.open(rel)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		if !slash && site.isFile(rel+"/index.html") {
			j.entry = newEntry(key, entRedirect, nil)
		}
		return
	default:
		return // devices, FIFOs and sockets are not served
	}
	size := st.Size
	mod := time.Unix(st.Mtim.Unix())
	var data []byte
	if size <= j.srv.cache.maxFile || j.whole && size <= maxWholeFile {
		data = make([]byte, size)
		n, err := preadFull(fd, data, 0)
		if err != nil {
			return
		}
		data, size = data[:n], int64(n) // a file that shrank meanwhile
	}
	j.entry = newEntry(key, entFile, newStaticFile(rel, data, size, mod))
	j.entry.whole = j.whole
}

// maxWholeFile bounds a file a handler reads whole (ResponseWriter.File).
const maxWholeFile = 64 << 20

// readChunk reads the rest of a chunk of a streamed file, after the j.n
// bytes read already, checking that the file is still the one whose header
// was sent. It opens the file unless the stream holds it open, and holds it
// from then on if it may (keep).
func (j *FileJob) readChunk() {
	j.err = nil
	fd := j.fd
	if fd < 0 {
		var err error
		if fd, err = j.srv.site.open(j.file.rel); err != nil {
			j.err = err
			return
		}
		if j.keep {
			j.fd = fd
		} else {
			defer unix.Close(fd)
		}
	}
	if j.err = j.file.changed(fd); j.err != nil {
		return
	}
	want := int(min(int64(len(j.buf)), j.file.size-j.off))
	n, err := preadFull(fd, j.buf[j.n:want], j.off+int64(j.n))
	j.n += n
	if err == nil && j.n < want {
		err = errChanged
	}
	j.err = err
}

// changed reports errChanged when the file open as fd is no longer the one
// whose header was sent: its size or modification time differs.
func (f *staticFile) changed(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size != f.size || st.Mtim.Nano() != f.mtimeNs {
		return errChanged
	}
	return nil
}

// readNowait reads into b at off from the page cache alone, never waiting
// for the disk (preadv2 with RWF_NOWAIT, Linux 4.14): EAGAIN when the first
// page is not cached, a short count when only some are.
func readNowait(fd int, b []byte, off int64) (int, error) {
	iov := [1][]byte{b}
	return unix.Preadv2(fd, iov[:], off, unix.RWF_NOWAIT)
}

// preadFull reads until b is full or the file ends.
func preadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

// openFlags: O_NONBLOCK so that opening a FIFO does not wait for a writer.
const openFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK

// open opens rel below the docroot without following a symbolic link in any
// component, so nothing outside the docroot is ever served.
func (s *Site) open(rel string) (int, error) {
	if !s.noOpenat2 {
		fd, err := unix.Openat2(s.root, rel, &unix.OpenHow{
			Flags:   openFlags,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.ENOSYS {
			return fd, err
		}
	}
	// Before Linux 5.6: one component at a time, none of them a link.
	dir := s.root
	for {
		name, rest, more := strings.Cut(rel, "/")
		flags := openFlags
		if more {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dir, name, flags, 0)
		if dir != s.root {
			unix.Close(dir)
		}
		if err != nil || !more {
			return fd, err
		}
		dir, rel = fd, rest
	}
}

// isFile reports whether rel is a regular file below the docroot.
func (s *Site) isFile(rel string) bool {
	fd, err := s.open(rel)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}
