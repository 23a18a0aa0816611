package lab

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// XDP actions used by the lab's programs.
const (
	xdpPass = 2 // XDP_PASS
	xdpTx   = 3 // XDP_TX
)

// xdpProgram loads a two-instruction XDP program that returns action.
func xdpProgram(action int32) (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "percore_lab",
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, action),
			asm.Return(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("load xdp program: %w", err)
	}
	return p, nil
}

// attachXDP attaches an XDP program returning action to interface name in ns,
// in native mode, with a bpf_link (gone when the link is closed or the process
// exits).
func attachXDP(ns *NS, name string, action int32) (link.Link, error) {
	p, err := xdpProgram(action)
	if err != nil {
		return nil, err
	}
	defer p.Close() // the link holds its own reference
	var l link.Link
	err = ns.Do(func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: p, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attach xdp to %s in %s: %w", name, ns, err)
	}
	return l, nil
}
