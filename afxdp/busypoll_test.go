package afxdp

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"percore/lab"
)

// TestSetBusyPollRefused plays kernels that refuse each option: one line
// that names the option and what to do, classified ErrBusyPoll.
func TestSetBusyPollRefused(t *testing.T) {
	for _, c := range []struct {
		refuse int
		errno  unix.Errno
		want   string
	}{
		{unix.SO_PREFER_BUSY_POLL, unix.ENOPROTOOPT, "SO_PREFER_BUSY_POLL 1: the kernel has no SO_PREFER_BUSY_POLL (protocol not available): preferred busy polling needs Linux 5.11 or later"},
		{unix.SO_BUSY_POLL, unix.EPERM, "SO_BUSY_POLL 20: not permitted"},
		{unix.SO_BUSY_POLL_BUDGET, unix.EINVAL, "SO_BUSY_POLL_BUDGET 64: out of range"},
	} {
		var set []int
		err := setBusyPoll(7, BusyPoll{Budget: 64}, func(fd, level, opt, val int) error {
			if fd != 7 || level != unix.SOL_SOCKET {
				t.Errorf("setsockopt(%d, %d, %d)", fd, level, opt)
			}
			set = append(set, opt)
			if opt == c.refuse {
				return c.errno
			}
			return nil
		})
		if !errors.Is(err, ErrBusyPoll) || !errors.Is(err, c.errno) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("refused %d: %v, want one line with %q", c.refuse, err, c.want)
		}
		if set[len(set)-1] != c.refuse {
			t.Errorf("refused %d: went on to set %v", c.refuse, set)
		}
	}
	vals := map[int]int{}
	if err := setBusyPoll(7, BusyPoll{Budget: 16, Timeout: 50 * time.Microsecond}, func(fd, level, opt, val int) error {
		vals[opt] = val
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if vals[unix.SO_PREFER_BUSY_POLL] != 1 || vals[unix.SO_BUSY_POLL] != 50 || vals[unix.SO_BUSY_POLL_BUDGET] != 16 {
		t.Errorf("set %v", vals)
	}
}

// TestBusyPollOnVeth: veth takes the options (it has no NAPI for them to
// drive, so they change nothing there); the socket reads two back (the
// kernel has no getsockopt for SO_BUSY_POLL_BUDGET), and an
// empty rx ring costs a recvfrom each Receive.
func TestBusyPollOnVeth(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pb"})
	var line string
	logf := func(f string, a ...any) { line = fmt.Sprintf(f, a...) }
	_, socks := attachLab(t, l, ProgramConfig{IP: l.ServerIP}, Config{FrameCount: 64, NoHugePages: true, BusyPoll: BusyPoll{Budget: 64}, Logf: logf}, 1)
	s := socks[0]
	if !strings.HasSuffix(line, "bound in copy mode (zero-copy unsupported: operation not supported), UMEM in 4 KiB pages, busy polling (budget 64)") {
		t.Errorf("bind line %q", line)
	}
	if !s.BusyPolling() {
		t.Fatal("busy polling refused on this kernel")
	}
	for opt, want := range map[int]int{unix.SO_PREFER_BUSY_POLL: 1, unix.SO_BUSY_POLL: 20} {
		if got, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, opt); err != nil || got != want {
			t.Errorf("option %d = %d, %v; want %d", opt, got, err, want)
		}
	}
	rx := make([]Desc, 8)
	for range 3 {
		s.Receive(rx)
	}
	if st, _ := s.Stats(); st.RxWakeups != 3 {
		t.Errorf("3 empty Receives made %d recvfrom calls", st.RxWakeups)
	}
}
