package lab

import (
	"fmt"
	"strings"

	"github.com/safchain/ethtool"
)

// DisableOffloads turns off tx checksum, TSO and GSO offloads on interface
// name in ns, through the ethtool ioctl (no shell-out). The kernel end of a
// veth otherwise sends partial checksums, which a checking stack must drop.
func DisableOffloads(ns *NS, name string) error {
	return ns.Do(func() error {
		e, err := ethtool.NewEthtool() // its socket belongs to this namespace
		if err != nil {
			return fmt.Errorf("ethtool in %s: %w", ns, err)
		}
		defer e.Close()
		feats, err := e.Features(name)
		if err != nil {
			return fmt.Errorf("ethtool features of %s in %s: %w", name, ns, err)
		}
		off := map[string]bool{}
		for f := range feats {
			if strings.HasPrefix(f, "tx-checksum") || strings.HasSuffix(f, "segmentation") && strings.HasPrefix(f, "tx-") {
				off[f] = false
			}
		}
		if err := e.Change(name, off); err != nil {
			return fmt.Errorf("ethtool offloads off on %s in %s: %w", name, ns, err)
		}
		after, err := e.Features(name)
		if err != nil {
			return fmt.Errorf("ethtool features of %s in %s: %w", name, ns, err)
		}
		for f := range off {
			if after[f] {
				return fmt.Errorf("ethtool: %s still on for %s in %s", f, name, ns)
			}
		}
		return nil
	})
}
