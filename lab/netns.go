package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NS is a named network namespace made by this package (visible to
// `ip netns exec NAME`). A nil *NS stands for the namespace the process
// started in (the root namespace for a normal process); every method accepts it.
//
// NS is set up and torn down by one goroutine; Do, Handle and Sysctl may be
// called from any goroutine.
type NS struct {
	Name string
	fd   netns.NsHandle
}

const netnsDir = "/var/run/netns"

// NewNS creates the named network namespace name. It fails if the name exists.
func NewNS(name string) (*NS, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if _, err := os.Stat(filepath.Join(netnsDir, name)); err == nil {
		return nil, fmt.Errorf("create netns %s: already exists", name)
	}
	var (
		h   netns.NsHandle
		err error
	)
	// netns.NewNamed switches the calling thread into the new namespace: do it on
	// a throw-away locked thread.
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		h, err = netns.NewNamed(name)
	}()
	<-done
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	n := &NS{Name: name, fd: h}
	if err := recordOwner(name); err != nil {
		n.Delete()
		return nil, fmt.Errorf("create netns %s: record its maker: %w", name, err)
	}
	// Loopback up, so local sockets and ping to self work in the namespace.
	if err := n.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		n.Delete()
		return nil, fmt.Errorf("create netns %s: lo up: %w", name, err)
	}
	return n, nil
}

// OpenNS opens an existing named namespace (for example one made by
// `cmd/lab up`). Delete on it removes the name.
func OpenNS(name string) (*NS, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	return &NS{Name: name, fd: h}, nil
}

// Delete closes the handle and removes the name; the kernel frees the
// namespace (and destroys its interfaces, taking veth peers with them) once
// no process or thread is left in it. Safe to call twice and on nil.
func (n *NS) Delete() error {
	if n == nil || n.fd == -1 {
		return nil
	}
	n.fd.Close()
	n.fd = -1
	err := netns.DeleteNamed(n.Name)
	dropOwner(n.Name)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("delete netns %s: %w", n.Name, err)
	}
	return nil
}

// Disown keeps the namespace when this process dies without deleting it:
// no later lab sweeps it (SweepStale). `lab up` uses it for a lab meant to
// outlive its command.
func (n *NS) Disown() {
	if n != nil {
		dropOwner(n.Name)
	}
}

// String names the namespace for messages.
func (n *NS) String() string {
	if n == nil {
		return "root"
	}
	return n.Name
}

// Fd returns the namespace file descriptor, or -1 for nil (the root).
func (n *NS) Fd() int {
	if n == nil {
		return -1
	}
	return int(n.fd)
}

// Enter moves the calling OS thread into the namespace. The caller must have
// called runtime.LockOSThread and must never unlock it afterwards (let the
// goroutine exit locked so the thread dies): an unlocked thread would carry
// the namespace to whatever goroutine runs on it next. A shard whose AF_XDP
// socket binds to an interface in the namespace enters it this way before
// creating the socket; the socket stays bound to that namespace's interface.
func (n *NS) Enter() error {
	if n == nil {
		return nil
	}
	if err := netns.Set(n.fd); err != nil {
		return fmt.Errorf("enter netns %s: %w", n.Name, err)
	}
	return nil
}

// Do runs fn on a fresh OS thread inside the namespace and returns its error.
// Anything fn creates (sockets, netlink handles) stays in the namespace.
// Goroutines started by fn do not inherit the namespace.
func (n *NS) Do(fn func() error) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err = n.Enter(); err != nil {
			return
		}
		err = fn()
	}()
	<-done
	return err
}

// Handle returns a netlink handle that acts inside the namespace. Close it
// when done.
func (n *NS) Handle() (*netlink.Handle, error) {
	if n == nil {
		return netlink.NewHandle()
	}
	h, err := netlink.NewHandleAt(n.fd)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", n.Name, err)
	}
	return h, nil
}

// Sysctl writes value to /proc/sys/<key> (key like "net/core/txrehash") as
// seen from inside the namespace: /proc/sys/net resolves to the namespace of
// the thread that opens it.
func (n *NS) Sysctl(key, value string) error {
	return n.Do(func() error {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n, err)
		}
		return nil
	})
}
