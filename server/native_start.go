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
		if err := run.buildLab(no, max(no.LabQueues, len(cpus)), &cfg); err != nil {
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
		queues += len(run.dev.Owned(i))
	}
	drain := NewDrainGroup(queues) // every queue's Native drains before any closes
	g, err := shard.Start(shardConfig(o, cpus), func(sh *shard.Shard) error {
		var ns *NativeShard
		if len(run.dev.Owned(sh.ID)) > 1 {
			ns = &NativeShard{}
			sh.AddStopper(ns)
			sh.AddReporter(ns)
		}
		for _, id := range run.dev.Owned(sh.ID) {
			// Each queue its own stack, so each its own seed.
			tcfg := netstack.TCPConfig{MaxConns: no.MaxConns, CC: no.CC, Seed: binary.LittleEndian.Uint64(seed[:]) + uint64(id)}
			if no.tcp != nil {
				no.tcp(&tcfg)
			}
			q, err := run.dev.NewQueue(id, native.QueueConfig{TCP: tcfg})
			if err != nil {
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
			cfg.Logf("native: shard %d: %s", sh.ID, q.Describe())
			if err := q.Register(sh); err != nil {
				q.Close()
				return fmt.Errorf("shard %d: %w", sh.ID, err)
			}
			nc := NativeConfig{Ports: clear, Site: site, Log: logw, Drain: drain, Shard: ns,
				TLS: tlsConf, TLSPorts: tlsPorts, TLSHandshakeTimeout: o.HeaderTimeout}
			if _, err := NewNative(sh, q, nc, time.Now()); err != nil {
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
