package server

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"percore/afxdp"
	"percore/httpd"
	"percore/lab"
	"percore/netstack"
	"percore/shard"
)

// nativeRun is what the native stack holds beside the shards: the XDP
// program (one per interface, an XSKMAP entry per queue) and the lab when
// --lab built one. Both are released after the shards exit.
type nativeRun struct {
	prog *afxdp.Program
	lab  *lab.Lab
	imp  *lab.Impaired
}

func (r *nativeRun) close() error {
	var errs []error
	if r.prog != nil {
		errs = append(errs, r.prog.Close()) // detaches XDP
		r.prog = nil
	}
	if r.imp != nil {
		errs = append(errs, r.imp.Close())
	} else if r.lab != nil {
		errs = append(errs, r.lab.Close())
	}
	r.imp, r.lab = nil, nil
	return errors.Join(errs...)
}

// startNative starts shards on the native stack: lab (--lab), queue check,
// XDP program, then per shard (on its pinned thread) the AF_XDP socket of its
// queue and the Native around it.
func startNative(o Options, s *Server, cpus []int, site *httpd.Site, logw io.Writer) (err error) {
	no := &o.Native
	run := &nativeRun{}
	defer func() {
		if err != nil {
			run.close()
		}
	}()
	if os.Geteuid() != 0 {
		return fmt.Errorf("--network-stack native needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) for AF_XDP and XDP: run as root, or use --network-stack posix")
	}
	iface, addr, mask, gw := no.Iface, no.Addr, no.Netmask, no.Gateway
	mtu := 1500
	if no.Lab {
		c := lab.Config{Prefix: no.LabPrefix, Queues: len(cpus), ServerRoot: true}
		if c.Prefix == "" {
			c.Prefix = "ph"
		}
		if no.Impair != nil {
			if run.imp, err = lab.NewImpaired(c, *no.Impair); err != nil {
				return fmt.Errorf("--lab-impair: %w", err)
			}
			run.lab = run.imp.Lab
		} else if run.lab, err = lab.New(c); err != nil {
			return fmt.Errorf("--lab: %w", err)
		}
		iface, addr, mtu = run.lab.ServerIf, run.lab.ServerIP, run.lab.MTU
		mask = netip.AddrFrom4([4]byte{255, 255, 255, 0})
		s.Lab, s.Impaired = run.lab, run.imp
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("--iface %q: no such interface in this network namespace: check `ip link`, or use --lab or --network-stack posix", iface)
	}
	if ifi.MTU > 0 && ifi.MTU < mtu {
		mtu = ifi.MTU
	}
	if len(ifi.HardwareAddr) != 6 {
		return fmt.Errorf("--iface %s has no Ethernet address: the native stack needs an Ethernet interface", iface)
	}
	nq, err := rxQueues(iface)
	if err != nil {
		return fmt.Errorf("--iface %s: read its queue count: %w", iface, err)
	}
	if nq < len(cpus) {
		return fmt.Errorf("--smp %d needs %d rx queues but %s has %d: raise them with `ethtool -L %s combined %d`, or lower --smp to %d",
			len(cpus), len(cpus), iface, nq, iface, len(cpus), nq)
	}
	ports := make([]uint16, len(o.Ports))
	for i, p := range o.Ports {
		ports[i] = uint16(p)
	}
	if run.prog, err = afxdp.NewProgram(afxdp.ProgramConfig{IP: addr, Ports: ports, MaxQueues: max(64, len(cpus))}); err != nil {
		return err
	}
	if err = run.prog.Attach(iface, no.XDPMode); err != nil {
		return err
	}
	var mac netstack.MAC
	copy(mac[:], ifi.HardwareAddr)
	a4, _ := netstack.IPv4AddrFrom(addr)
	m4, _ := netstack.IPv4AddrFrom(mask)
	var g4 netstack.IPv4Addr
	if gw.IsValid() {
		g4, _ = netstack.IPv4AddrFrom(gw)
	}
	logf := no.Logf
	if logf == nil {
		logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "percore: "+f+"\n", a...) }
	}
	var seed [8]byte
	rand.Read(seed[:])
	natives := make([]*Native, len(cpus))
	drain := NewDrainGroup(len(cpus))
	g, err := shard.Start(shard.Config{CPUs: cpus, PollMode: o.PollMode, Spin: o.IdlePoll, StopTimeout: o.StopTimeout}, func(sh *shard.Shard) error {
		sock, err := afxdp.Open(afxdp.Config{Interface: iface, Queue: sh.ID, FrameCount: no.Frames, Logf: once(sh.ID, logf)})
		if err != nil {
			return fmt.Errorf("shard %d: %w", sh.ID, err)
		}
		if err := run.prog.Register(sock); err != nil {
			sock.Close()
			return fmt.Errorf("shard %d: %w", sh.ID, err)
		}
		tcfg := netstack.TCPConfig{MaxConns: no.MaxConns, Seed: binary.LittleEndian.Uint64(seed[:]) + uint64(sh.ID)}
		if no.TCP != nil {
			no.TCP(&tcfg)
		}
		n, err := NewNative(sh, sock, NativeConfig{
			Stack: netstack.Config{MAC: mac, Addr: a4, Netmask: m4, Gateway: g4},
			MTU:   mtu,
			TCP:   tcfg,
			Ports: ports,
			Site:  site,
			Log:   logw,
			Drain: drain,
		}, time.Now())
		if err != nil {
			return fmt.Errorf("shard %d: %w", sh.ID, err)
		}
		natives[sh.ID] = n
		return nil
	})
	if err != nil {
		return err
	}
	s.group, s.nativeRun = g, run
	s.Addr = netip.AddrPortFrom(addr, ports[0])
	return nil
}

// once passes only shard 0's socket mode line on (every shard would say the same).
func once(id int, logf func(string, ...any)) func(string, ...any) {
	if id == 0 {
		return logf
	}
	return func(string, ...any) {}
}

// rxQueues is the interface's active rx queue count, as ethtool channels
// report it (combined + rx), else as netlink reports allocated.
func rxQueues(iface string) (int, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return 0, err
	}
	if e, err := ethtool.NewEthtool(); err == nil {
		defer e.Close()
		if ch, err := e.GetChannels(iface); err == nil && ch.CombinedCount+ch.RxCount > 0 {
			return int(ch.CombinedCount + ch.RxCount), nil
		}
	}
	return l.Attrs().NumRxQueues, nil
}

// reachHelp is what --lab prints on stdout: how to reach the server from the
// client namespace.
func reachHelp(s *Server, ports []int) string {
	l := s.Lab
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(l.ServerIP, uint16(ports[0])))
	ns := l.ClientExec()
	return fmt.Sprintf("lab: %s\n"+
		"reach it from the client namespace:\n"+
		"  %s curl -s %s\n"+
		"  %s wrk -t1 -c64 -d10s %s\n"+
		"  %s bash    # a shell in the client namespace\n",
		l, ns, url, ns, url, ns)
}
