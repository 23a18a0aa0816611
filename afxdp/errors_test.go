package afxdp

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"percore/lab"
)

func TestOpenErrors(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pe", Queues: 2})
	quiet := func(string, ...any) {}
	l.ServerNS.Do(func() error {
		_, err := Open(Config{Interface: "pc-missing0", Logf: quiet})
		if err == nil || !strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "--") {
			t.Errorf("missing interface: %v", err)
		}
		_, err = Open(Config{Interface: l.ServerIf, Queue: 2, Logf: quiet})
		if err == nil || !strings.Contains(err.Error(), "ethtool -L "+l.ServerIf+" combined 3") {
			t.Errorf("queue out of range: %v", err)
		}
		_, err = Open(Config{Interface: l.ServerIf, FrameSize: 3000, Logf: quiet})
		if err == nil || !strings.Contains(err.Error(), "2048 or 4096") {
			t.Errorf("bad frame size: %v", err)
		}
		_, err = Open(Config{Interface: l.ServerIf, Bind: BindZeroCopy, FrameCount: 64, Logf: quiet})
		if err == nil || !strings.Contains(err.Error(), "zero-copy") {
			t.Errorf("forced zero-copy on veth: %v", err)
		}
		// A second socket on a held queue.
		s, err := Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.ZeroCopy() {
			t.Error("veth bound zero-copy")
		}
		_, err = Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: quiet})
		if err == nil {
			t.Error("two sockets bound to one queue")
		}
		return nil
	})
}

func TestAttachErrors(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pa"})
	l.ServerNS.Do(func() error {
		p1, err := NewProgram(ProgramConfig{IP: ourIP})
		if err != nil {
			t.Fatal(err)
		}
		defer p1.Close()
		p2, err := NewProgram(ProgramConfig{IP: ourIP})
		if err != nil {
			t.Fatal(err)
		}
		defer p2.Close()
		if err := p1.Attach(l.ServerIf, Native); err != nil {
			t.Fatal(err)
		}
		if err := p2.Attach(l.ServerIf, Native); !errors.Is(err, ErrXDPBusy) {
			t.Errorf("second attach: %v, want ErrXDPBusy", err)
		}
		if err := p2.Attach("pc-missing0", Native); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("attach to missing interface: %v", err)
		}
		// Detach then attach again works: nothing is left behind.
		if err := p1.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p2.Attach(l.ServerIf, Native); err != nil {
			t.Errorf("attach after detach: %v", err)
		}
		return nil
	})
	if _, err := NewProgram(ProgramConfig{}); err == nil {
		t.Error("program without an IPv4 address")
	}
	if _, err := ParseAttachMode("offload"); err == nil {
		t.Error("bad --xdp-mode accepted")
	}
}

// TestWithoutPrivileges drops every capability on one locked thread (Linux
// credentials are per thread) and checks the user gets the privilege message.
func TestWithoutPrivileges(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pp"})
	var openErr, progErr error
	l.ServerNS.Do(func() error { // a fresh locked thread that dies afterwards
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var none [2]unix.CapUserData
		if err := unix.Capset(&hdr, &none[0]); err != nil {
			t.Errorf("capset: %v", err)
			return nil
		}
		_, openErr = Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: func(string, ...any) {}})
		_, progErr = NewProgram(ProgramConfig{IP: ourIP})
		return nil
	})
	for _, err := range []error{openErr, progErr} {
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "run as root") {
			t.Errorf("without capabilities: %v", err)
		}
	}
	t.Log(openErr)
	t.Log(progErr)
}

// TestMemlockLimit: without CAP_IPC_LOCK the UMEM counts against
// RLIMIT_MEMLOCK; over it, the user is told to raise it.
func TestMemlockLimit(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pm"})
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 1 << 20 // lowering the soft limit needs no privilege; restored below
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	var openErr error
	l.ServerNS.Do(func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var caps [2]unix.CapUserData
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			t.Errorf("capget: %v", err)
			return nil
		}
		caps[0].Effective &^= 1 << unix.CAP_IPC_LOCK
		if err := unix.Capset(&hdr, &caps[0]); err != nil {
			t.Errorf("capset: %v", err)
			return nil
		}
		// 4 MiB of UMEM over a 1 MiB limit.
		s, err := Open(Config{Interface: l.ServerIf, FrameCount: 1024, NoHugePages: true, Logf: func(string, ...any) {}})
		if err == nil {
			s.Close()
		}
		openErr = err
		return nil
	})
	if !errors.Is(openErr, ErrMemlock) || !strings.Contains(openErr.Error(), "ulimit -l") {
		t.Errorf("over memlock: %v", openErr)
	}
	t.Log(openErr)
}

// TestAttachModes: native and generic attach show in the link's XDP state,
// and Close leaves nothing attached.
func TestAttachModes(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pg"})
	state := func() uint32 {
		h, err := l.ServerNS.Handle()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ln, err := h.LinkByName(l.ServerIf)
		if err != nil {
			t.Fatal(err)
		}
		if x := ln.Attrs().Xdp; x != nil && x.Attached {
			return x.AttachMode
		}
		return 0
	}
	for _, c := range []struct {
		mode AttachMode
		want uint32
	}{{Native, nl.XDP_ATTACHED_DRV}, {Generic, nl.XDP_ATTACHED_SKB}} {
		p, err := NewProgram(ProgramConfig{IP: ourIP})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.ServerNS.Do(func() error { return p.Attach(l.ServerIf, c.mode) }); err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		if got := state(); got != c.want {
			t.Errorf("%s: attach mode %d, want %d", c.mode, got, c.want)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := state(); got != 0 {
			t.Errorf("%s: still attached after Close (mode %d)", c.mode, got)
		}
	}
}

func TestRaiseMemlock(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })
	low := old
	low.Cur = 1 << 16
	if low.Cur > low.Max {
		low.Cur = low.Max
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	if err := RaiseMemlock(); err != nil {
		t.Fatal(err)
	}
	var now unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &now)
	if now.Cur != now.Max || now.Cur < old.Cur {
		t.Errorf("after RaiseMemlock: soft %d hard %d (was %d)", now.Cur, now.Max, old.Cur)
	}
}

// TestAttachErrorRefused: the bare EINVAL i40e, mlx5 and virtio_net return
// becomes one line naming what drivers refuse for and the fix.
func TestAttachErrorRefused(t *testing.T) {
	err := attachError("eth2", Native, fmt.Errorf("create link: %w", unix.EINVAL))
	msg := err.Error()
	if !errors.Is(err, ErrRefused) || !errors.Is(err, unix.EINVAL) || !strings.Contains(msg, "`ethtool -K eth2 lro off rx-gro-hw off`") ||
		!strings.Contains(msg, "3046 on i40e and ice") || strings.Contains(msg, "--") {
		t.Errorf("native EINVAL: %v", err)
	}
	if err := attachError("eth2", Generic, unix.EINVAL); errors.Is(err, ErrRefused) {
		t.Errorf("generic EINVAL blamed on the driver: %v", err)
	}
}

// TestReopenClosedQueue: a queue a closed socket held binds again at once,
// though the kernel lets go of it later, from a work queue: a shard or a
// test that stops and starts again must not find its own queue "held".
func TestReopenClosedQueue(t *testing.T) {
	l := newLab(t, lab.Config{Prefix: "pr"})
	quiet := func(string, ...any) {}
	l.ServerNS.Do(func() error {
		for i := range 30 {
			s, err := Open(Config{Interface: l.ServerIf, FrameCount: 64, Logf: quiet})
			if err != nil {
				t.Fatalf("open %d after a close: %v", i, err)
			}
			s.Close()
		}
		return nil
	})
}
