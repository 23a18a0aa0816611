package native

// What a client needs to tell which rx queue the NIC puts a flow's replies
// on: the RSS key, the indirection table's size (RSSTableSize) and the
// queues its entries cycle over.

// RSSKey is the interface's Toeplitz RSS key as the driver shows it
// (ETHTOOL_GRSSH); nil where it shows none (veth) or hashes otherwise.
func (d *Device) RSSKey() []byte {
	var key []byte
	d.inNetns(func() error {
		key, _ = readRSSKey(d.cfg.Iface)
		return nil
	})
	return key
}

// RxQueues is the interface's rx queue count as Open found it.
func (d *Device) RxQueues() int { return d.rxq }
