// Package lab builds throw-away multi-queue networks on one machine for tests,
// benchmarks and cmd/lab: network namespaces joined by veth pairs, addresses
// only from 198.18.0.0/15 (RFC 2544), names unique per run, and a Close that
// removes everything it made.
//
// The primitives (NewNS, NewVeth, NS.Do, DisableOffloads, NS.Sysctl) are
// exported so other topologies (an impairment middle namespace) can be built
// from the same pieces; Lab is the common two-namespace topology:
//
//	client ns: <client veth> 198.18.x.2/24  <==veth, N queues==>  <server veth> (no IP) :server ns
//
// NewImpaired builds the same lab with an impairment bridge (seeded loss,
// reordering, duplication, corruption, delay) in a middle namespace, since
// the kernel has no netem. NewNativePair builds one whose client end can run
// a native (AF_XDP) load generator beside kernel clients.
//
// Namespaces are per OS thread in Linux. Every function here that enters a
// namespace does so on a fresh goroutine locked to its OS thread and never
// unlocks it, so the thread dies with the goroutine and no other goroutine ever
// runs in a foreign namespace by accident. A shard that must live in the
// server namespace calls NS.Enter on its own locked thread (see Enter).
package lab
