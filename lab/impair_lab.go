package lab

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
	"github.com/safchain/ethtool"
)

// Impaired is a Lab with an impairment bridge in the middle:
//
//	client ns: <ClientIf> ==veth== <MidClientIf> :middle ns: <MidServerIf> ==veth== <ServerIf> :server ns
//
// The middle ends carry no address and no IPv6; the Bridge copies every frame
// from one to the other through its Impairers. Both veth pairs get the lab's
// queue count and MTU, so native XDP on the server end attaches as without
// the bridge. Frames reach the server end on the tx queue the middle kernel
// hashes each flow to (stable per flow), not the one the client picked.
// Built by NewImpaired, removed by Close (Lab.Close, which runs the bridge's
// teardown first).
type Impaired struct {
	*Lab
	MiddleNS    *NS
	MidClientIf string // middle end of the client's pair
	MidServerIf string // middle end of the server's pair
	Bridge      *Bridge
	Spec        ImpairSpec

	xdpPass []link.Link // XDP_PASS on both middle ends (see build)
}

// NewImpaired builds a lab like New with a bridge applying spec between
// client and server, through New's Config.Between hook. On failure everything
// made so far is removed; Lab.Close removes all of it, bridge included.
func NewImpaired(c Config, spec ImpairSpec) (*Impaired, error) {
	if c.Between != nil {
		return nil, fmt.Errorf("impaired lab: Config.Between is already set")
	}
	im := &Impaired{Spec: spec}
	c.Between = im.build
	l, err := New(c)
	if err != nil {
		return nil, err
	}
	im.Lab = l
	return im, nil
}

// build makes the middle namespace, both veth pairs and the bridge; New has
// made the client and server namespaces and applied c's defaults.
func (im *Impaired) build(l *Lab, c Config) (err error) {
	im.MidClientIf = Name(c.Prefix, l.ID, "mc")
	im.MidServerIf = Name(c.Prefix, l.ID, "ms")
	l.OnClose(im.teardown) // first, so a partial build is undone too
	if im.MiddleNS, err = NewNS(Name(c.Prefix, l.ID, "-mid")); err != nil {
		return err
	}
	// No IPv6 in the middle, so its kernel sends nothing of its own (router
	// solicitations, MLD) out of the bridge ends. Set before the links exist.
	for _, k := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err = im.MiddleNS.Sysctl(k, "1"); err != nil {
			return err
		}
	}
	if err = NewVeth(VethConfig{
		Name: l.ServerIf, NS: l.ServerNS,
		PeerName: im.MidServerIf, PeerNS: im.MiddleNS,
		Queues: c.Queues, MTU: c.MTU,
	}); err != nil {
		return err
	}
	if err = NewVeth(VethConfig{
		Name: l.ClientIf, NS: l.ClientNS,
		PeerName: im.MidClientIf, PeerNS: im.MiddleNS,
		Queues: c.Queues, MTU: c.MTU,
	}); err != nil {
		return err
	}
	// A frame that an XDP program on a veth end sends back out (XDP_TX) or
	// redirects into a veth reaches the peer only if the peer has an XDP
	// program too; without one the sender counts it in xdp_tx_errors and drops
	// it (TestImpairXDPTx). Skb transmits, AF_XDP copy-mode tx among them, do
	// not need it (TestImpairAFXDPTx). An XDP_PASS program on each middle end
	// lets either kind through, so the server end behaves as if its peer were
	// a plain veth. Attaching XDP turns GRO on, so GRO goes off after it.
	for _, name := range []string{im.MidClientIf, im.MidServerIf} {
		var x link.Link
		if x, err = attachXDP(im.MiddleNS, name, xdpPass); err != nil {
			return err
		}
		im.xdpPass = append(im.xdpPass, x)
		if err = disableGRO(im.MiddleNS, name); err != nil {
			return err
		}
	}
	im.Bridge, err = NewBridge(im.MiddleNS, im.MidClientIf, im.MidServerIf, c.MTU, im.Spec)
	return err
}

// teardown stops the bridge, detaches the XDP programs, deletes both veth
// pairs and removes the middle namespace. Run by Lab.Close.
func (im *Impaired) teardown() error {
	var errs []error
	if im.Bridge != nil {
		errs = append(errs, im.Bridge.Close())
	}
	for _, x := range im.xdpPass {
		errs = append(errs, x.Close())
	}
	im.xdpPass = nil
	// Delete the pairs now: freeing the namespace would destroy them later,
	// in the kernel's own time, racing with Lab.Close deleting the client end.
	if im.MiddleNS != nil {
		errs = append(errs, DeleteLink(im.MiddleNS, im.MidClientIf), DeleteLink(im.MiddleNS, im.MidServerIf))
	}
	errs = append(errs, im.MiddleNS.Delete())
	return errors.Join(errs...)
}

// Stats returns the bridge's counters by direction: to the server and to the client.
func (im *Impaired) Stats() (toServer, toClient ImpairStats) {
	if im.Bridge == nil {
		return
	}
	s := im.Bridge.Stats()
	return s.AB, s.BA
}

// String describes the lab and the impairment in one line.
func (im *Impaired) String() string {
	return fmt.Sprintf("%v, impaired by ns %s (%s)", im.Lab, im.MiddleNS, im.Spec)
}

// disableGRO turns receive offload off on a middle end: the bridge must read
// the frames as they were sent, never GRO-merged into one longer than the MTU.
// (veth merges only on its NAPI path, taken when XDP is attached or GRO is
// asked for; off makes sure.)
func disableGRO(ns *NS, name string) error {
	return ns.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool in %s: %w", ns, err)
		}
		defer e.Close()
		if err := e.Change(name, map[string]bool{"rx-gro": false}); err != nil {
			return fmt.Errorf("ethtool gro off on %s in %s: %w", name, ns, err)
		}
		f, err := e.Features(name)
		if err != nil {
			return fmt.Errorf("ethtool features of %s in %s: %w", name, ns, err)
		}
		if f["rx-gro"] {
			return fmt.Errorf("ethtool: rx-gro still on for %s in %s", name, ns)
		}
		return nil
	})
}
