module percore

go 1.26.8

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/google/gopacket v1.1.19 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
