package afxdp

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Supported says why this process cannot use AF_XDP, or nil. It checks only
// what a test may skip for: not running as root, or a kernel without AF_XDP
// sockets (CONFIG_XDP_SOCKETS). Anything else is a failure, reported where it
// happens. Setup only: it opens and closes a socket.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: AF_XDP sockets, XDP programs and network namespaces")
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return errors.New("kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)")
	}
	if err == nil {
		unix.Close(fd)
	}
	return nil
}
