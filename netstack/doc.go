// Package netstack holds percore's network stacks: the posix stack (kernel sockets,
// one SO_REUSEPORT listener and one epoll per shard) and the userspace stack
// (Ethernet, ARP, IPv4, ICMP, TCP) that a shard drives over a batched Link.
//
// It must not read a clock or start goroutines: time is an argument, and Poll
// returns when it wants to be called again.
package netstack
