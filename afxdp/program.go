package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// AttachMode is how the XDP program hooks into the driver.
type AttachMode int

const (
	// Native runs the program in the driver (veth, i40e, ice, mlx5...). Default.
	Native AttachMode = iota
	// Generic runs it on the skb path: any driver, slower (and on veth the
	// queue numbering is off by one: use Native there).
	Generic
)

// ParseAttachMode parses an attach mode's name: native or generic.
func ParseAttachMode(s string) (AttachMode, error) {
	switch s {
	case "native", "":
		return Native, nil
	case "generic":
		return Generic, nil
	}
	return 0, fmt.Errorf("afxdp: attach mode %q: use native or generic", s)
}

func (m AttachMode) String() string {
	if m == Generic {
		return "generic"
	}
	return "native"
}

// ProgramConfig describes the steering program.
type ProgramConfig struct {
	IP        netip.Addr   // percore's IPv4 address; frames for others go to the kernel
	Aliases   []netip.Addr // more IPv4 addresses of ours, steered as IP is
	Ports     []uint16     // local TCP ports to steer at start (listen ports)
	MaxQueues int          // XSKMAP entries [64]

	// AllTCP steers every TCP segment to IP, whatever its port, so the
	// stack answers a closed port with a RST as a host does (RFC 9293
	// §3.10.7.1). Only for an address no kernel interface holds: the
	// kernel would lose its own connections on it.
	AllTCP bool
}

// Program is the XDP program that steers percore's frames to the AF_XDP
// socket of the frame's rx queue, with its three maps:
//
//	xsks   XSKMAP  rx queue -> socket
//	ports  array   TCP local port (as the program loads it: network
//	               order) -> 1 if steered, 0 if not; every port has its
//	               entry, so a client's tens of thousands of source ports
//	               cost an indexed load, not a hash lookup per frame
//	config array   [0] = our IPv4 (network order)
//	addrs  hash    our aliases (network order) -> 1, looked up only when
//	               there are aliases and a destination is not our IPv4
//
// It redirects ARP whose target is one of our addresses, and IPv4 ICMP and
// TCP (to a port in ports, or any non-first fragment; any TCP with AllTCP)
// to one of them, each with its receive time in front (stamp);
// everything else is XDP_PASS.
// A frame that should be redirected but has no socket on its queue is passed
// to the kernel too (bpf_redirect_map's fallback action), so an unbound queue
// never black-holes traffic.
//
// One Program serves all queues of one interface; it is set up by the
// process before the shards start and closed after they stop.
type Program struct {
	prog                       *ebpf.Program
	xsks, ports, config, addrs *ebpf.Map
	link                       link.Link
	iface                      string
}

// XDP actions.
const (
	xdpAborted  = 0
	xdpDrop     = 1
	xdpPass     = 2
	xdpTX       = 3
	xdpRedirect = 4
)

// NewProgram creates the maps and loads the program (not yet attached).
func NewProgram(c ProgramConfig) (_ *Program, err error) {
	if !c.IP.Is4() {
		return nil, fmt.Errorf("afxdp: program needs an IPv4 address, got %v", c.IP)
	}
	if c.MaxQueues == 0 {
		c.MaxQueues = 64
	}
	_ = rlimit.RemoveMemlock() // pre-5.11 kernels charge maps to RLIMIT_MEMLOCK; best effort
	p := &Program{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: "percore_xsks", Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(c.MaxQueues)}); err != nil {
		return nil, bpfErr("create xskmap", err)
	}
	if p.ports, err = ebpf.NewMap(&ebpf.MapSpec{Name: "percore_ports", Type: ebpf.Array, KeySize: 4, ValueSize: 1, MaxEntries: 1 << 16}); err != nil {
		return nil, bpfErr("create port map", err)
	}
	if p.config, err = ebpf.NewMap(&ebpf.MapSpec{Name: "percore_cfg", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		return nil, bpfErr("create config map", err)
	}
	if len(c.Aliases) > maxAliases {
		return nil, fmt.Errorf("afxdp: %d aliases, at most %d", len(c.Aliases), maxAliases)
	}
	if p.addrs, err = ebpf.NewMap(&ebpf.MapSpec{Name: "percore_addrs", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: uint32(max(1, len(c.Aliases)))}); err != nil {
		return nil, bpfErr("create address map", err)
	}
	if err = p.SetIP(c.IP); err != nil {
		return nil, err
	}
	for _, a := range c.Aliases {
		if !a.Is4() {
			return nil, fmt.Errorf("afxdp: alias %v is not IPv4", a)
		}
		if err = p.addrs.Put(a.As4(), uint8(1)); err != nil {
			return nil, bpfErr(fmt.Sprintf("add alias %v", a), err)
		}
	}
	for _, port := range c.Ports {
		if err = p.AllowPort(port); err != nil {
			return nil, err
		}
	}
	if p.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "percore_steer",
		Type:         ebpf.XDP,
		License:      "Dual BSD/GPL",
		Instructions: steerInsns(p.xsks.FD(), p.ports.FD(), p.config.FD(), p.addrs.FD(), c.AllTCP, len(c.Aliases) > 0),
	}); err != nil {
		return nil, bpfErr("load xdp program", err)
	}
	return p, nil
}

// be16 and be32 give the value a native-endian load of the network-order
// bytes yields, so the program compares without byte swaps.
func be16(v uint16) int32 {
	return int32(binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, v)))
}

// maxAliases bounds ProgramConfig.Aliases (the address map's size).
const maxAliases = 255

// ours checks the IPv4 address at packet offset off (bounds checked by the
// caller): our address (r9) goes on at label ok, the next instruction; with
// aliases, one in the address map does too (a lookup that clobbers r0-r5);
// any other -> pass.
func ours(addrs int, aliases bool, off int16, ok string) asm.Instructions {
	if !aliases {
		return asm.Instructions{ // falls through to ok
			asm.LoadMem(asm.R4, asm.R7, off, asm.Word),
			asm.JNE.Reg(asm.R4, asm.R9, "pass"),
		}
	}
	insns := asm.Instructions{
		asm.LoadMem(asm.R4, asm.R7, off, asm.Word),
		asm.JEq.Reg(asm.R4, asm.R9, ok),
	}
	return append(insns, lookup(addrs, -4, asm.Word, ok)...)
}

// lookup looks r4, stored in size bytes at stack offset slot, up in map m
// (clobbering r0-r5): found -> hit, else -> pass.
func lookup(m int, slot int16, size asm.Size, hit string) asm.Instructions {
	insns := lookupElem(m, asm.StoreMem(asm.RFP, slot, asm.R4, size))
	return append(insns, asm.Ja.Label(hit))
}

// lookupElem looks up in map m the key that store writes to the stack
// (clobbering r0-r5): r0 then points to the value; a miss -> pass.
func lookupElem(m int, store asm.Instruction) asm.Instructions {
	return asm.Instructions{
		store,
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, int32(store.Offset)),
		asm.LoadMapPtr(asm.R1, m),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
	}
}

// stamp writes the receive time in front of the frame, as 8 bytes of XDP
// metadata, then goes on at to_xsk: bpf_ktime_get_ns (CLOCK_MONOTONIC) taken
// here, in the driver's receive path, says when the frame arrived, which the
// shard learns only when it next reads the rx ring. AF_XDP keeps the
// metadata in front of the data: in zero-copy it stays in the frame's
// headroom, and copy mode copies data_meta..data_end. A driver without
// metadata support fails the adjust: the frame goes on without a stamp, and
// the socket finds the zero its slot was cleared to (Socket.RxStamp).
func stamp() asm.Instructions {
	return asm.Instructions{
		// bpf_xdp_adjust_meta(ctx, -8): 8 bytes of metadata before data.
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("redirect"),
		asm.Mov.Imm(asm.R2, -rxStampLen),
		asm.FnXdpAdjustMeta.Call(),
		asm.JNE.Imm(asm.R0, 0, "to_xsk"),
		// The helper invalidates packet pointers: load data and
		// data_meta again, and show the verifier meta+8 <= data.
		asm.LoadMem(asm.R7, asm.R6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(asm.R8, asm.R6, 8, asm.Word), // xdp_md.data_meta
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Add.Imm(asm.R2, rxStampLen),
		asm.JGT.Reg(asm.R2, asm.R7, "to_xsk"),
		// r8 survives the call (r6-r9 are callee-saved).
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R8, 0, asm.R0, asm.DWord),
	}
}

// steerInsns assembles the program. Registers: r6 ctx, r7 data, r8
// data_end, r9 our IPv4 (as loaded). Every packet load is preceded by a
// bounds check against data_end, as the verifier demands. With allTCP the
// port lookup is left out, and without aliases the address map's (the
// verifier refuses unreachable code).
func steerInsns(xsks, ports, config, addrs int, allTCP, aliases bool) asm.Instructions {
	const (
		ethLen  = 14
		ipv4Min = 20
	)
	head := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	// r9 = config[0] (our IP); unset -> pass.
	head = append(head, lookupElem(config, asm.StoreImm(asm.RFP, -4, 0, asm.Word))...)
	head = append(head, asm.Instructions{
		asm.LoadMem(asm.R9, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R9, 0, "pass"),

		asm.LoadMem(asm.R7, asm.R6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(asm.R8, asm.R6, 4, asm.Word), // xdp_md.data_end

		// Ethernet header, ethertype.
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, ethLen),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
		asm.LoadMem(asm.R3, asm.R7, 12, asm.Half),
		asm.JEq.Imm(asm.R3, be16(0x0806), "arp"),
		asm.JNE.Imm(asm.R3, be16(0x0800), "pass"),

		// IPv4: destination is ours, version 4, IHL >= 5.
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, ethLen+ipv4Min),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
	}...)
	head = append(head, ours(addrs, aliases, ethLen+16, "ip_ours")...)
	head = append(head, asm.Instructions{
		asm.LoadMem(asm.R3, asm.R7, ethLen, asm.Byte).WithSymbol("ip_ours"),
		asm.Mov.Reg(asm.R4, asm.R3),
		asm.RSh.Imm(asm.R4, 4),
		asm.JNE.Imm(asm.R4, 4, "pass"),
		asm.And.Imm(asm.R3, 0x0f),
		asm.JLT.Imm(asm.R3, 5, "pass"),
		asm.LoadMem(asm.R4, asm.R7, ethLen+9, asm.Byte), // protocol
		asm.JEq.Imm(asm.R4, unix.IPPROTO_ICMP, "redirect"),
		asm.JNE.Imm(asm.R4, unix.IPPROTO_TCP, "pass"),
		// A non-first fragment has no TCP header; it is ours all the same.
		asm.LoadMem(asm.R4, asm.R7, ethLen+6, asm.Half),
		asm.And.Imm(asm.R4, be16(0x1fff)),
		asm.JNE.Imm(asm.R4, 0, "redirect"),
	}...)
	portCheck := asm.Instructions{
		// TCP destination port at ethLen + IHL*4 + 2 must be in ports.
		asm.LSh.Imm(asm.R3, 2),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Reg(asm.R2, asm.R3),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, ethLen+4),
		asm.JGT.Reg(asm.R4, asm.R8, "pass"),
		asm.LoadMem(asm.R4, asm.R2, ethLen+2, asm.Half),
	}
	// ports[r4] != 0: an array lookup, which the JIT inlines.
	portCheck = append(portCheck, lookupElem(ports, asm.StoreMem(asm.RFP, -8, asm.R4, asm.Word))...)
	portCheck = append(portCheck, asm.Instructions{
		asm.LoadMem(asm.R4, asm.R0, 0, asm.Byte),
		asm.JEq.Imm(asm.R4, 0, "pass"),
		asm.Ja.Label("redirect"),
	}...)
	if allTCP {
		portCheck = asm.Instructions{asm.Ja.Label("redirect")}
	}
	tail := asm.Instructions{
		// ARP for IPv4 over Ethernet whose target protocol address is ours.
		asm.Mov.Reg(asm.R2, asm.R7).WithSymbol("arp"),
		asm.Add.Imm(asm.R2, ethLen+28),
		asm.JGT.Reg(asm.R2, asm.R8, "pass"),
		asm.LoadMem(asm.R3, asm.R7, ethLen+2, asm.Half),
		asm.JNE.Imm(asm.R3, be16(0x0800), "pass"),
	}
	tail = append(tail, ours(addrs, aliases, ethLen+24, "redirect")...)
	tail = append(tail, stamp()...)
	tail = append(tail, asm.Instructions{
		// bpf_redirect_map(xsks, rx_queue_index, XDP_PASS): no socket -> pass.
		asm.LoadMapPtr(asm.R1, xsks).WithSymbol("to_xsk"),
		asm.LoadMem(asm.R2, asm.R6, 16, asm.Word), // xdp_md.rx_queue_index
		asm.Mov.Imm(asm.R3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),

		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}...)
	return append(append(head, portCheck...), tail...)
}

// SetIP changes the IPv4 address the program steers (its aliases stay).
func (p *Program) SetIP(ip netip.Addr) error {
	b := ip.As4()
	if err := p.config.Put(uint32(0), b); err != nil {
		return bpfErr("set ip", err)
	}
	return nil
}

// portKey is port's index in the port map: the value a native-endian load
// of its network-order bytes yields, as the program loads it.
func portKey(port uint16) uint32 { return uint32(be16(port)) }

// AllowPort steers TCP segments to local port port (a listen port, or the
// local port of an active open).
func (p *Program) AllowPort(port uint16) error {
	if err := p.ports.Put(portKey(port), uint8(1)); err != nil {
		return bpfErr(fmt.Sprintf("allow port %d", port), err)
	}
	return nil
}

// RemovePort stops steering TCP port port; a port not present is not an error.
func (p *Program) RemovePort(port uint16) error {
	if err := p.ports.Put(portKey(port), uint8(0)); err != nil {
		return bpfErr(fmt.Sprintf("remove port %d", port), err)
	}
	return nil
}

// Register puts s in the XSKMAP at its queue, so frames steered on that
// queue reach it. Closing s removes it from the map.
func (p *Program) Register(s *Socket) error {
	if err := p.xsks.Put(uint32(s.queue), uint32(s.fd)); err != nil {
		if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("afxdp: register queue %d: outside the XSKMAP (%d entries): raise ProgramConfig.MaxQueues: %w", s.queue, p.xsks.MaxEntries(), err)
		}
		return bpfErr(fmt.Sprintf("register queue %d", s.queue), err)
	}
	return nil
}

// Unregister removes the socket of queue q from the XSKMAP.
func (p *Program) Unregister(q int) error {
	if err := p.xsks.Delete(uint32(q)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return bpfErr(fmt.Sprintf("unregister queue %d", q), err)
	}
	return nil
}

// Attach attaches the program to iface (in the calling thread's network
// namespace) through a bpf_link, which the kernel removes when the process
// exits, so a crash never leaves the program behind.
func (p *Program) Attach(iface string, mode AttachMode) error {
	if p.link != nil {
		return fmt.Errorf("afxdp: program already attached to %s", p.iface)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return ifaceError(iface, err)
	}
	flags := link.XDPDriverMode
	if mode == Generic {
		flags = link.XDPGenericMode
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifi.Index, Flags: flags})
	if err != nil {
		return attachError(iface, mode, err)
	}
	p.link, p.iface = l, iface
	return nil
}

// attachError is one line for a refused attach that says what to do.
func attachError(iface string, mode AttachMode, err error) error {
	switch {
	case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST):
		return busyError(iface, err)
	case errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("afxdp: attach xdp to %s (%v): on veth the peer has more tx queues than %s has rx queues: give both ends the same queue count", iface, err, iface)
	case errors.Is(err, unix.ERANGE):
		return userErr(ErrMTU, err, "afxdp: attach xdp to %s (%v): MTU too large for native XDP: use at most 3506 on veth, or generic mode", iface, err)
	case errors.Is(err, unix.EOPNOTSUPP) && mode == Native:
		return userErr(ErrNoDriverXDP, err, "afxdp: attach xdp to %s (%v): the driver has no native XDP: use generic mode", iface, err)
	case errors.Is(err, unix.EINVAL) && mode == Native:
		// i40e, mlx5 and virtio_net say no more than this.
		return userErr(ErrRefused, err, "afxdp: attach xdp to %s (%v): the driver refused the program: drivers do while LRO or HW-GRO is on (`ethtool -K %s lro off rx-gro-hw off`) or the MTU is above what they take in one buffer (3046 on i40e and ice, 3498 on mlx5)", iface, err, iface)
	}
	return bpfErr(fmt.Sprintf("attach xdp to %s in %s mode", iface, mode), err)
}

// Detach removes the program from its interface; safe when not attached.
func (p *Program) Detach() error {
	if p.link == nil {
		return nil
	}
	err := p.link.Close()
	p.link = nil
	if err != nil {
		return fmt.Errorf("afxdp: detach xdp from %s: %w", p.iface, err)
	}
	return nil
}

// Close detaches the program and frees it and its maps. Safe to call twice.
func (p *Program) Close() error {
	errs := []error{p.Detach()}
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
		p.prog = nil
	}
	for _, m := range []**ebpf.Map{&p.xsks, &p.ports, &p.config, &p.addrs} {
		if *m != nil {
			errs = append(errs, (*m).Close())
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// Run runs the program once on frame through BPF_PROG_TEST_RUN and returns
// the XDP action; for tests and diagnostics.
func (p *Program) Run(frame []byte) (uint32, error) {
	return p.prog.Run(&ebpf.RunOptions{Data: frame})
}

func bpfErr(op string, err error) error { return sysErr(op, err) }
