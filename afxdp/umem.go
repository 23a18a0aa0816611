package afxdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// mapUMEM maps size bytes of anonymous memory for a UMEM, from 2 MiB
// hugepages when the system has them free, else from normal pages.
// It reports which it got.
func mapUMEM(size int, tryHuge bool) (mem []byte, huge bool, err error) {
	const flags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_POPULATE
	if tryHuge {
		hs := (size + hugePage - 1) &^ (hugePage - 1)
		m, err := unix.Mmap(-1, 0, hs, unix.PROT_READ|unix.PROT_WRITE, flags|unix.MAP_HUGETLB)
		if err == nil {
			return m[:size], true, nil
		}
		// ENOMEM (no free hugepages) or EINVAL (none configured): normal pages.
	}
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) {
			return nil, false, memlockError(size, err)
		}
		return nil, false, fmt.Errorf("afxdp: map umem of %d bytes: %w", size, err)
	}
	return m, false, nil
}

// unmapUMEM undoes mapUMEM; mem's capacity covers the whole mapping.
func unmapUMEM(mem []byte) error {
	return unix.Munmap(mem[:cap(mem)])
}
