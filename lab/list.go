package lab

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
)

// List returns the named namespaces that look like lab namespaces (suffix
// -cli, -srv or -mid) and start with prefix.
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		if strings.HasSuffix(n, "-cli") || strings.HasSuffix(n, "-srv") || strings.HasSuffix(n, "-mid") {
			out = append(out, n)
		}
	}
	return out, nil
}

// Namespaces returns the namespaces of the lab called name (the part before
// -cli/-srv/-mid, as `lab status` shows), matched exactly.
func Namespaces(name string) ([]string, error) {
	all, err := List(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		if n[:len(n)-4] == name {
			out = append(out, n)
		}
	}
	return out, nil
}

// RemoveByName deletes the named namespaces; their veth ends go with them.
// Server ends that live in the root namespace go when their client-side peer
// namespace is freed.
func RemoveByName(names []string) error {
	var errs []error
	for _, n := range names {
		ns, err := OpenNS(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, ns.Delete())
	}
	return errors.Join(errs...)
}

// Describe returns one line per interface in the named namespace: name,
// state and IPv4 addresses.
func Describe(name string) ([]string, error) {
	ns, err := OpenNS(name)
	if err != nil {
		return nil, err
	}
	defer ns.fd.Close()
	h, err := ns.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("links in %s: %w", name, err)
	}
	var out []string
	for _, l := range links {
		a := l.Attrs()
		if a.Name == "lo" {
			continue
		}
		line := fmt.Sprintf("%s %s mtu %d queues %d", a.Name, a.OperState, a.MTU, a.NumRxQueues)
		if addrs, err := h.AddrList(l, netlink.FAMILY_V4); err == nil {
			for _, ad := range addrs {
				line += " " + ad.IPNet.String()
			}
		}
		out = append(out, line)
	}
	return out, nil
}
