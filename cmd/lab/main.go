// Command lab builds, lists and removes percore's veth lab by hand:
//
//	lab up [--queues N] [--mtu M] [--prefix P] [--client-addrs N]   build a lab and print how to use it
//	lab status                                    list labs (namespaces named *-cli / *-srv)
//	lab down NAME|--all|--stale                   remove one lab (or every lab, or those whose maker died)
//
// With --hold, up keeps running and removes the lab on SIGINT/SIGTERM; without it
// the lab stays until `lab down`.
//
// With --impair SPEC (for example loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=1)
// up puts an impairment bridge in a middle namespace (*-mid) between client and
// server; the bridge runs in this process, so --impair implies --hold, and the
// bridge's counters are printed when the lab is removed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"percore/lab"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "status":
		err = status()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lab up [--queues N] [--mtu M] [--prefix P] [--client-addrs N] [--hold] [--impair SPEC] | lab down NAME|--all|--stale | lab status")
	os.Exit(2)
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	queues := fs.Int("queues", 2, "queues on both veth ends")
	mtu := fs.Int("mtu", 1500, "veth MTU (at most 3506 for native XDP)")
	prefix := fs.String("prefix", "pc", "name prefix")
	clientAddrs := fs.Int("client-addrs", 1, fmt.Sprintf("kernel addresses on the client end (.2, then .128 on; at most %d): each adds ~28K source ports to one server", lab.MaxClientAddrs))
	hold := fs.Bool("hold", false, "stay in the foreground and remove the lab on SIGINT/SIGTERM")
	impair := fs.String("impair", "", "impairment bridge between client and server, e.g. loss=5%,reorder=10%,duplicate=1%,corrupt=0.1%,delay=1ms,seed=1 (implies --hold)")
	fs.Parse(args)
	var spec lab.ImpairSpec
	if *impair != "" {
		var err error
		if spec, err = lab.ParseImpair(*impair); err != nil {
			return err
		}
		*hold = true // the bridge runs in this process
	}

	// Signals during setup must not leave half a lab behind.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	cfg := lab.Config{Prefix: *prefix, Queues: *queues, MTU: *mtu, ClientAddrs: *clientAddrs}
	var (
		l   *lab.Lab
		im  *lab.Impaired
		err error
	)
	if *impair != "" {
		if im, err = lab.NewImpaired(cfg, spec); err != nil {
			return err
		}
		l = im.Lab
	} else if l, err = lab.New(cfg); err != nil {
		return err
	}
	closeLab := l.Close
	if im != nil {
		closeLab = func() error { fmt.Println(im.Bridge.Stats()); return im.Close() }
	}
	select {
	case s := <-sig:
		closeLab()
		return fmt.Errorf("interrupted by %v; lab removed", s)
	default:
	}
	if im != nil {
		fmt.Println(im)
	} else {
		fmt.Println(l)
	}
	fmt.Printf("server interface: %s in netns %s (serve: ip netns exec %s httpd --network-stack native --iface %s --host-ipv4-addr %s --smp %d)\n",
		l.ServerIf, l.ServerNS, l.ServerNS, l.ServerIf, l.ServerIP, l.Queues)
	fmt.Printf("client commands:  %s ping %s\n", l.ClientExec(), l.ServerIP)
	if len(l.ClientIPs) > 1 {
		fmt.Printf("client addresses: wreck --host-ipv4-addr %s,%s-%s (the kernel's, on %s)\n",
			l.ClientIP, l.ClientIPs[1], l.ClientIPs[len(l.ClientIPs)-1], l.ClientIf)
	}
	fmt.Printf("native client:    wreck --network-stack native --netns %s --iface %s --host-ipv4-addr %s-%s (.3 to .127: no kernel interface holds them)\n",
		l.ClientNS, l.ClientIf, lab.Host(l.Subnet, 3), lab.Host(l.Subnet, 3+lab.MaxNativeAddrs-1))
	if !*hold {
		l.Disown()
		fmt.Printf("remove with:      lab down %s\n", l.ClientNS.Name[:len(l.ClientNS.Name)-len("-cli")])
		signal.Stop(sig)
		return nil
	}
	fmt.Println("holding; Ctrl-C removes the lab")
	<-sig
	return closeLab()
}

func down(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("down needs a lab name from `lab status` (e.g. pc1a2b3c), --all to remove every lab on this machine, or --stale for labs whose maker exited without removing them")
	}
	var names []string
	var err error
	if args[0] == "--stale" {
		names, err = lab.SweepStale("")
		for _, n := range names {
			fmt.Println("removed netns", n)
		}
		return err
	}
	if args[0] == "--all" {
		names, err = lab.List("")
	} else {
		names, err = lab.Namespaces(args[0])
		if err == nil && len(names) == 0 {
			err = fmt.Errorf("no lab named %s (see `lab status`)", args[0])
		}
	}
	if err != nil {
		return err
	}
	if err := lab.RemoveByName(names); err != nil {
		return err
	}
	for _, n := range names {
		fmt.Println("removed netns", n)
	}
	return nil
}

func status() error {
	names, err := lab.List("")
	if err != nil {
		return err
	}
	if len(names) == 0 {
		fmt.Println("no labs")
	}
	for _, n := range names {
		fmt.Println(n)
		lines, err := lab.Describe(n)
		if err != nil {
			fmt.Println("  ", err)
		}
		for _, l := range lines {
			fmt.Println("  ", l)
		}
	}
	return nil
}
