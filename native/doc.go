// Package native starts percore's native stack on one network interface: the
// one start-up that the server, the load generator and the tests share.
//
// Open checks the interface (root, present in its network namespace, an
// Ethernet address, its MTU, its rx queues, an address the kernel does not
// hold), chooses how the shards take more queues than there are shards
// (Config.RSS: the NIC's indirection table onto queues 0..shards-1, or
// several queues per shard; Device.Owned says which) or fewer (software
// forwarding: the queues' owners hash each TCP flow to its shard and pass
// its frames over rings; a shard without a queue opens its stack with
// NewForwarded), and
// loads and attaches the XDP program that steers our
// frames to the AF_XDP socket of the queue they arrive on: ARP for our
// address, and TCP to our listen ports (a server) or source ports (a
// client). Then each shard, on its own thread, calls NewQueue for each queue
// it owns (the AF_XDP socket, registered with the program; the AFXDPLink; the
// userspace Stack with TCP on, its MSS fitted to the MTU) and Register to plug
// it into its loop: a Poller that runs the stack over the link, a Source whose
// readable socket wakes a sleeping shard, and one wheel timer at the stack's
// next deadline.
//
// What runs on the stack (HTTP, a load generator's connections) is the
// caller's: the package must not import httpd, lab, bench or cmd, and holds
// no protocol logic of its own. Errors name no command-line flag; those that
// a caller may want to explain further unwrap to the sentinels in errors.go.
package native
