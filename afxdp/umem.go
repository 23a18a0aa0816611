package afxdp

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// mapUMEM maps size bytes of anonymous memory for a UMEM, from 2 MiB
// hugepages (hugetlbfs) when the system has them free, else from normal
// pages that the kernel is asked to back with transparent hugepages where
// it can. It reports whether it got hugetlbfs pages.
//
// Why hugepages: the fill ring hands the kernel frames in the order they
// were freed, so each received frame is one the shard has not touched for
// thousands of frames. In 4 KiB pages nearly every one is a TLB miss, and
// on a guest whose host keeps the page tables in software a small page's
// first touch traps to the host (on the lab about 6.8 µs a page against 35
// ns in hugepages, BenchmarkUMEMFirstTouch; the shard's read of received
// frames' first words then took 1-2% of the machine during downloads).
// 64 MiB of UMEM is 16,384 small pages or 32 huge ones.
func mapUMEM(size int, tryHuge bool) (mem []byte, huge bool, err error) {
	const prot = unix.PROT_READ | unix.PROT_WRITE
	const flags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	n := size
	if tryHuge {
		hs := (size + hugePage - 1) &^ (hugePage - 1)
		m, err := unix.Mmap(-1, 0, hs, prot, flags|unix.MAP_POPULATE|unix.MAP_HUGETLB)
		if err == nil {
			return m[:size], true, nil
		}
		// ENOMEM (no free hugepages) or EINVAL (none configured): normal pages.
		if size >= hugePage {
			// A whole number of hugepages, so that the kernel aligns
			// the mapping to one for transparent hugepages.
			n = hs
		}
	}
	// Populated only after the request, or it would be in 4 KiB pages.
	m, err := unix.Mmap(-1, 0, n, prot, flags)
	if err != nil {
		return nil, false, mapError(size, err)
	}
	if tryHuge {
		_ = unix.Madvise(m, unix.MADV_HUGEPAGE) // EINVAL: a kernel without them
	}
	if err := populate(m); err != nil {
		unix.Munmap(m)
		return nil, false, mapError(size, err)
	}
	return m[:size], false, nil
}

// populate faults m's pages in now, as MAP_POPULATE does, so that the
// first frames do not.
func populate(m []byte) error {
	err := unix.Madvise(m, unix.MADV_POPULATE_WRITE) // Linux 5.14
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	for i := 0; i < len(m); i += unix.Getpagesize() {
		m[i] = 0
	}
	return nil
}

func mapError(size int, err error) error {
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) {
		return memlockError(size, err)
	}
	return fmt.Errorf("afxdp: map umem of %d bytes: %w", size, err)
}

// unmapUMEM undoes mapUMEM; mem's capacity covers the whole mapping.
func unmapUMEM(mem []byte) error {
	return unix.Munmap(mem[:cap(mem)])
}

// transparentHuge returns how many bytes of m transparent hugepages back;
// 0 when none or unknown. smaps counts the whole mapping that holds m, which
// the kernel may have merged with a neighbouring anonymous one of the same
// flags, so the count is at most len(m) (an estimate then, not a bound).
func transparentHuge(m []byte) int {
	f := strings.Fields(smapsField(m, "AnonHugePages:"))
	if len(f) == 0 {
		return 0
	}
	kb, _ := strconv.Atoi(f[0])
	return min(kb<<10, len(m))
}

// smapsField returns the value of the field name (e.g. "AnonHugePages:")
// of the mapping that holds m's first byte, from /proc/self/smaps; "" when
// not found.
func smapsField(m []byte, name string) string {
	if len(m) == 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return ""
	}
	addr := uint64(uintptr(unsafe.Pointer(&m[0])))
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		head, rest, _ := strings.Cut(l, " ")
		if lo, hi, ok := strings.Cut(head, "-"); ok {
			// A mapping's first line: "start-end perms offset dev inode [path]".
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && s <= addr && addr < e
			continue
		}
		if in && head == name {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
