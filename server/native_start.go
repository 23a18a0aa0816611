package server

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"percore/afxdp"
	"percore/httpd"
	"percore/lab"
	"percore/native"
	"percore/netstack"
	"percore/shard"
)

// nativeRun is what the native stack holds beside the shards: the device
// (the XDP program on the interface) and the lab when Options.Native.Lab
// built one. Both are released after the shards exit.
type nativeRun struct {
	dev *native.Device
	lab *lab.Lab
	imp *lab.Impaired
}

func (r *nativeRun) close() error {
	var errs []error
	if r.dev != nil {
		errs = append(errs, r.dev.Close()) // detaches XDP
		r.dev = nil
	}
	if r.imp != nil {
		errs = append(errs, r.imp.Close())
	} else if r.lab != nil {
		errs = append(errs, r.lab.Close())
	}
	r.imp, r.lab = nil, nil
	return errors.Join(errs...)
}

// buildLab builds the veth lab (with the impairment bridge when asked) that
// Native.Lab serves on, and points cfg at its server end.
func (run *nativeRun) buildLab(no *NativeOptions, queues int, cfg *native.Config) (err error) {
	if os.Geteuid() != 0 {
		return native.ErrNotRoot
	}
	c := lab.Config{Prefix: no.LabPrefix, Queues: queues, ServerRoot: true}
	if c.Prefix == "" {
		c.Prefix = "ph"
	}
	if no.Impair != nil {
		if run.imp, err = lab.NewImpaired(c, *no.Impair); err != nil {
			return fmt.Errorf("impaired lab: %w", err)
		}
		run.lab = run.imp.Lab
	} else if run.lab, err = lab.New(c); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	cfg.Iface, cfg.Addr, cfg.MTU = run.lab.ServerIf, run.lab.ServerIP, run.lab.MTU
	cfg.Netmask, cfg.Gateway = netip.AddrFrom4([4]byte{255, 255, 255, 0}), netip.Addr{}
	return nil
}

// startNative starts shards on the native stack: the lab (Native.Lab), the
// device (checks, XDP program), then per shard, on its pinned thread, its
// queue (socket, link, stack) and the Native serving httpd on it.
func startNative(o Options, s *Server, cpus []int, site *httpd.Site, logw io.Writer) (err error) {
	no := &o.Native
	run := &nativeRun{}
	defer func() {
		if err != nil {
			run.close()
		}
	}()
	cfg := native.Config{
		Iface: no.Iface, Addr: no.Addr, Netmask: no.Netmask, Gateway: no.Gateway,
		Queues: len(cpus), RSS: no.RSS, XDPMode: no.XDPMode, Frames: no.Frames, Logf: no.Logf,
		BusyPoll: afxdp.BusyPoll{Budget: no.BusyPoll},
	}
	var clear, tlsPorts []uint16
	for _, p := range o.Ports {
		clear = append(clear, uint16(p))
	}
	var tlsConf *tls.Config
	if o.TLS.Cert != "" {
		if tlsConf, err = LoadTLS(o.TLS); err != nil {
			return err
		}
		if o.TLSPort >= 0 {
			tlsPorts = []uint16{uint16(o.TLSPort)}
		} else {
			clear, tlsPorts = nil, clear // TLS on every --port
		}
	}
	cfg.Ports = append(slices.Clone(clear), tlsPorts...)
	if cfg.Logf == nil {
		cfg.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "percore: "+f+"\n", a...) }
	}
	if no.Lab {
		queues := len(cpus)
		if no.LabQueues > 0 {
			queues = no.LabQueues
		}
		if err := run.buildLab(no, queues, &cfg); err != nil {
			return err
		}
		s.Lab, s.Impaired = run.lab, run.imp
	}
	if run.dev, err = native.Open(cfg); err != nil {
		return err
	}
	var seed [8]byte
	rand.Read(seed[:])
	queues := 0
	for i := range cpus {
		queues += max(len(run.dev.Owned(i)), 1) // a shard without a queue has one forwarded stack
	}
	drain := NewDrainGroup(queues) // every queue's Native drains before any closes
	g, err := shard.Start(shardConfig(o, cpus), func(sh *shard.Shard) error {
		var ns *NativeShard
		if len(run.dev.Owned(sh.ID)) > 1 {
			ns = &NativeShard{}
			sh.AddStopper(ns)
			sh.AddReporter(ns)
		}
		ids := run.dev.Owned(sh.ID)
		if len(ids) == 0 {
			ids = []int{-1} // no queue: the stack the queues' owners forward to (native.RSSForward)
		}
		mem := netstack.NewMemBudget(shardMemory(no, len(cpus), len(ids)))
		for _, id := range ids {
			// Each queue its own stack, so each its own seed.
			tcfg := netstack.TCPConfig{MaxConns: no.MaxConns, CC: no.CC, Budget: mem, Seed: binary.LittleEndian.Uint64(seed[:]) + uint64(id)}
			if no.tcp != nil {
				no.tcp(&tcfg)
			}
			var q *native.Queue
			var err error // this shard's: the closure runs on every shard's thread
			if id < 0 {
				tcfg.Seed += uint64(sh.ID) << 32
				q, err = run.dev.NewForwarded(sh.ID, native.QueueConfig{TCP: tcfg})
			} else {
				q, err = run.dev.NewQueue(id, native.QueueConfig{TCP: tcfg})
			}
			if err != nil {
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
			cfg.Logf("native: shard %d: %s", sh.ID, q.Describe())
			if err := q.Register(sh); err != nil {
				q.Close()
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
			nc := NativeConfig{Ports: clear, Site: site, Log: logw, Drain: drain, Shard: ns, Memory: mem,
				TLS: tlsConf, TLSPorts: tlsPorts, TLSHandshakeTimeout: o.HeaderTimeout}
			n, err := NewNative(sh, q, nc, time.Now())
			if err != nil {
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
			if err := attachFileIO(sh, n.Server(), streamFiles(len(cpus))); err != nil { // for Offload, with or without a docroot
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.group, s.nativeRun = g, run
	s.Addr = netip.AddrPortFrom(cfg.Addr, cfg.Ports[0])
	if tlsPorts != nil {
		s.TLSAddr = netip.AddrPortFrom(cfg.Addr, tlsPorts[0])
	}
	return nil
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

// shardMemory is one shard's memory budget in bytes: --memory per shard, a
// share of --memory/total, or by default what native.SizeFor gives each of
// the shard's queues.
func shardMemory(no *NativeOptions, shards, queues int) int {
	switch {
	case no.Memory > 0 && no.MemTotal:
		return no.Memory / shards
	case no.Memory > 0:
		return no.Memory
	}
	return queues * native.SizeFor(no.MaxConns, no.Frames).Memory
}
