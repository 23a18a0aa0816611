package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RSS is how the shards take an interface with more rx queues than shards,
// or fewer.
type RSS uint8

const (
	RSSAuto    RSS = iota // more queues: RSSIndir where the driver has an indirection table, else RSSQueues; fewer: RSSForward
	RSSIndir              // program the NIC's indirection table onto queues 0..shards-1
	RSSQueues             // shard i owns queues i, i+shards, i+2*shards, ...
	RSSOff                // shard i owns queue i; flows hashed to other queues go to the kernel
	RSSForward            // fewer queues: shard i < queues owns queue i and hands other shards their flows (forward.go)
)

var rssNames = [...]string{RSSAuto: "auto", RSSIndir: "indir", RSSQueues: "queues", RSSOff: "off", RSSForward: "forward"}

func (r RSS) String() string {
	if int(r) < len(rssNames) {
		return rssNames[r]
	}
	return fmt.Sprintf("RSS(%d)", uint8(r))
}

// ParseRSS reads a strategy by its name.
func ParseRSS(s string) (RSS, error) {
	for i, n := range rssNames {
		if n == s {
			return RSS(i), nil
		}
	}
	return 0, fmt.Errorf("native: unknown RSS strategy %q", s)
}

// assignQueues deals rx queues 0..queues-1 to the shards round-robin: shard i
// owns i, i+shards, i+2*shards, ... (every queue has one owner).
func assignQueues(queues, shards int) [][]int {
	own := make([][]int, shards)
	for q := range queues {
		own[q%shards] = append(own[q%shards], q)
	}
	return own
}

// equalTable is an indirection table of size entries spreading flows with
// equal weights over queues 0..queues-1, as `ethtool -X IFACE equal N` does.
func equalTable(size, queues int) []uint32 {
	t := make([]uint32, size)
	for i := range t {
		t[i] = uint32(i % queues)
	}
	return t
}

// The ethtool ioctl for the indirection table (linux/ethtool.h): struct
// ethtool_rxfh_indir is {cmd, size uint32; ring_index [size]uint32}; a get
// with size 0 returns the table's size. The ioctl is written here because
// github.com/safchain/ethtool holds a fixed 256-entry table, and NICs have
// larger ones (the kernel would write past it).
const (
	ethtoolGRXFHINDIR = 0x38
	ethtoolSRXFHINDIR = 0x39
)

// ethtoolIfreq is struct ifreq with ifr_data.
type ethtoolIfreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtoolIoctl makes the ethtool request buf holds (its command first) on
// iface; the kernel writes the answer into buf.
func ethtoolIoctl(iface string, buf []uint32) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr ethtoolIfreq
	copy(ifr.name[:unix.IFNAMSIZ-1], iface)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

// getIndir reads the interface's indirection table; a driver without one
// answers EOPNOTSUPP (veth) or a size of 0.
func getIndir(iface string) ([]uint32, error) {
	head := []uint32{ethtoolGRXFHINDIR, 0}
	if err := ethtoolIoctl(iface, head); err != nil {
		return nil, err
	}
	if head[1] == 0 {
		return nil, unix.EOPNOTSUPP
	}
	buf := make([]uint32, 2+head[1])
	buf[0], buf[1] = ethtoolGRXFHINDIR, head[1]
	if err := ethtoolIoctl(iface, buf); err != nil {
		return nil, err
	}
	return buf[2:], nil
}

// setIndir writes the interface's indirection table (its size unchanged).
func setIndir(iface string, t []uint32) error {
	buf := make([]uint32, 2+len(t))
	buf[0], buf[1] = ethtoolSRXFHINDIR, uint32(len(t))
	copy(buf[2:], t)
	return ethtoolIoctl(iface, buf)
}

// rssStateDir keeps, while a server has an interface's indirection table
// programmed, the table it found there: a start after a crash puts it back.
const rssStateDir = "/run/percore"

// rssSaved is where the original table of iface is kept.
func rssSaved(dir, iface string) string { return filepath.Join(dir, iface+".rss") }

func formatTable(t []uint32) string {
	s := make([]string, len(t))
	for i, v := range t {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, " ") + "\n"
}

func parseTable(b []byte) ([]uint32, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil, errors.New("empty table")
	}
	t := make([]uint32, len(f))
	for i, s := range f {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, err
		}
		t[i] = uint32(v)
	}
	return t, nil
}

// leftover reads the table a crashed run saved for iface; nil: none.
func leftover(dir, iface string) ([]uint32, error) {
	b, err := os.ReadFile(rssSaved(dir, iface))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := parseTable(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", rssSaved(dir, iface), err)
	}
	return t, nil
}

// saveTable records iface's original table before it is changed.
func saveTable(dir, iface string, t []uint32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := rssSaved(dir, iface) + ".tmp"
	if err := os.WriteFile(tmp, []byte(formatTable(t)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, rssSaved(dir, iface))
}

// indirState is the indirection table a Device programmed: the original
// to put back on Close.
type indirState struct {
	dir, iface string
	orig       []uint32
}

// restoreLeftover puts back the table a run that did not stop cleanly left
// saved under dir (it changed iface's table and never restored it), and
// logs that it did; nothing saved: nothing to do.
func restoreLeftover(dir, iface string, logf func(string, ...any)) error {
	old, err := leftover(dir, iface)
	if err != nil {
		return fmt.Errorf("native: %w: %v", ErrRSSLeftover, err)
	}
	if old == nil {
		return nil
	}
	if err := setIndir(iface, old); err != nil {
		return fmt.Errorf("native: %w: restore the table %s saved: %v", ErrRSSLeftover, rssSaved(dir, iface), err)
	}
	logf("native: %s: restored the RSS indirection table a run that did not stop cleanly left (saved in %s)", iface, rssSaved(dir, iface))
	return os.Remove(rssSaved(dir, iface))
}

// programIndir points iface's indirection table at queues 0..queues-1 and
// saves the original under dir until restore. The error wraps
// ErrIndirRefused where the driver has no table or refuses the new one.
func programIndir(dir, iface string, queues int) (*indirState, error) {
	cur, err := getIndir(iface)
	if err != nil {
		return nil, fmt.Errorf("native: %w: read %s's table: %v", ErrIndirRefused, iface, err)
	}
	if err := saveTable(dir, iface, cur); err != nil {
		return nil, fmt.Errorf("native: save %s's RSS table: %w", iface, err)
	}
	if err := setIndir(iface, equalTable(len(cur), queues)); err != nil {
		os.Remove(rssSaved(dir, iface))
		return nil, fmt.Errorf("native: %w: %s refused a table over queues 0..%d: %v", ErrIndirRefused, iface, queues-1, err)
	}
	return &indirState{dir: dir, iface: iface, orig: cur}, nil
}

// restore puts the original table back and forgets it.
func (s *indirState) restore() error {
	if err := setIndir(s.iface, s.orig); err != nil {
		return fmt.Errorf("native: restore %s's RSS table: %w (run `ethtool -X %s default`)", s.iface, err, s.iface)
	}
	return os.Remove(rssSaved(s.dir, s.iface))
}
