package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// IRQ is one queue interrupt of a NIC.
type IRQ struct {
	Num   int    // the /proc/irq/<Num> directory
	Queue int    // the queue number in its name
	Name  string // as /proc/interrupts shows it
}

// QueueIRQs finds iface's per-queue interrupts in the text of
// /proc/interrupts, by the names the zero-copy drivers give them:
// "i40e-eth2-TxRx-3", "ice-eth2-TxRx-3", "eth2-TxRx-3" (ixgbe), "eth2-3", and
// "mlx5_comp3@pci:0000:3b:00.0" (mlx5, named by the PCI address pci).
func QueueIRQs(interrupts, iface, pci string) []IRQ {
	named := regexp.MustCompile(`^(?:[a-z0-9]+-)?` + regexp.QuoteMeta(iface) + `-(?:TxRx-|txrx-|rx-)?(\d+)$`)
	var mlx *regexp.Regexp
	if pci != "" {
		mlx = regexp.MustCompile(`^mlx5_comp(\d+)@pci:` + regexp.QuoteMeta(pci) + `$`)
	}
	var irqs []IRQ
	for _, line := range strings.Split(interrupts, "\n") {
		num, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			continue // NMI, LOC and the other named rows
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		name := f[len(f)-1]
		m := named.FindStringSubmatch(name)
		if m == nil && mlx != nil {
			m = mlx.FindStringSubmatch(name)
		}
		if m == nil {
			continue
		}
		q, _ := strconv.Atoi(m[1])
		irqs = append(irqs, IRQ{Num: n, Queue: q, Name: name})
	}
	return irqs
}

// pinQueueIRQs points the interrupt of queue q at cpus[q], so each shard's
// queue is served on its own core, and fails if irqbalance would undo it.
// It returns the interrupts it had to move: called again after a server
// starts, those are the ones the start reset (i40e resets its rings, and
// their interrupts, on every XDP attach and detach).
func pinQueueIRQs(iface string, cpus []int) ([]IRQ, error) {
	if pid := findProcess("irqbalance"); pid != "" {
		return nil, fmt.Errorf("irqbalance (pid %s) is running and would move the queue interrupts: systemctl stop irqbalance", pid)
	}
	pci := ""
	if dev, err := os.Readlink(filepath.Join("/sys/class/net", iface, "device")); err == nil {
		pci = filepath.Base(dev)
	}
	return pinIRQs("/proc", iface, pci, cpus)
}

// pinIRQs does pinQueueIRQs under proc (/proc, or a test's copy): every
// queue interrupt below len(cpus) whose smp_affinity_list is not its CPU
// is rewritten, and returned.
func pinIRQs(proc, iface, pci string, cpus []int) ([]IRQ, error) {
	b, err := os.ReadFile(filepath.Join(proc, "interrupts"))
	if err != nil {
		return nil, fmt.Errorf("read /proc/interrupts: %w", err)
	}
	irqs := QueueIRQs(string(b), iface, pci)
	if len(irqs) == 0 {
		return nil, fmt.Errorf("no queue interrupts of %s in /proc/interrupts: pin them by hand (docs/tuning.md) and drop --irq-affinity", iface)
	}
	var moved []IRQ
	for _, irq := range irqs {
		if irq.Queue >= len(cpus) {
			continue
		}
		path := filepath.Join(proc, "irq", strconv.Itoa(irq.Num), "smp_affinity_list")
		want := strconv.Itoa(cpus[irq.Queue])
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0); err != nil {
			return moved, fmt.Errorf("pin %s (irq %d) to CPU %s: %w", irq.Name, irq.Num, want, err)
		}
		moved = append(moved, irq)
	}
	return moved, nil
}

// findProcess returns the pid of a process whose command name is comm, or "".
func findProcess(comm string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(b)) == comm {
			return e.Name()
		}
	}
	return ""
}
