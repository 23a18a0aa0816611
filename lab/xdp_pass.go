package lab

import "io"

// AttachPass attaches an XDP program that passes every frame to interface
// name in ns (in native mode, through a bpf_link that closing the returned
// Closer, or the process's exit, removes). A veth end needs an XDP program
// to receive the frames an AF_XDP socket on its peer sends: with it a
// native load generator drives a kernel-stack server on that end.
func AttachPass(ns *NS, name string) (io.Closer, error) {
	return attachXDP(ns, name, xdpPass)
}
