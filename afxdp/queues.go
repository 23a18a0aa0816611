package afxdp

import (
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
)

// RxQueues returns how many rx queues the interface has active, as ethtool
// channels report (combined + rx), else as netlink reports allocated.
func RxQueues(ifindex int) (int, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return 0, err
	}
	if e, err := ethtool.NewEthtool(); err == nil {
		defer e.Close()
		if ch, err := e.GetChannels(l.Attrs().Name); err == nil && ch.CombinedCount+ch.RxCount > 0 {
			return int(ch.CombinedCount + ch.RxCount), nil
		}
	}
	return l.Attrs().NumRxQueues, nil
}
