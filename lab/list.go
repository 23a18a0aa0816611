package lab

import (
	"errors"
	"os"
	"strings"
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
