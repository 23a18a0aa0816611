package sweep

import (
	"slices"
	"testing"
)

const interruptsSample = `            CPU0       CPU1       CPU2       CPU3
   0:         35          0          0          0   IO-APIC   2-edge      timer
  98:          0          0          0          0  IR-PCI-MSI 1572864-edge      i40e-0000:03:00.0:misc
  99:     123456          0          0          0  IR-PCI-MSI 1572865-edge      i40e-eth2-TxRx-0
 100:          0     654321          0          0  IR-PCI-MSI 1572866-edge      i40e-eth2-TxRx-1
 101:          0          0          1          0  IR-PCI-MSI 1572867-edge      i40e-eth20-TxRx-2
 102:          5          0          0          0  IR-PCI-MSI 1572868-edge      ice-eth3-TxRx-0
 103:          5          0          0          0  IR-PCI-MSI 1572869-edge      eth4-TxRx-7
 140:          0          0          0          9  IR-PCI-MSI 524288-edge      mlx5_comp0@pci:0000:3b:00.0
 141:          0          0          0          9  IR-PCI-MSI 524289-edge      mlx5_comp1@pci:0000:3b:00.0
 142:          0          0          0          9  IR-PCI-MSI 524290-edge      mlx5_comp1@pci:0000:af:00.0
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:    1234567    1234567    1234567    1234567   Local timer interrupts
`

func TestQueueIRQs(t *testing.T) {
	for _, c := range []struct {
		iface, pci string
		want       []IRQ
	}{
		{"eth2", "0000:03:00.0", []IRQ{{99, 0, "i40e-eth2-TxRx-0"}, {100, 1, "i40e-eth2-TxRx-1"}}},
		{"eth3", "", []IRQ{{102, 0, "ice-eth3-TxRx-0"}}},
		{"eth4", "", []IRQ{{103, 7, "eth4-TxRx-7"}}},
		{"enp59s0", "0000:3b:00.0", []IRQ{{140, 0, "mlx5_comp0@pci:0000:3b:00.0"}, {141, 1, "mlx5_comp1@pci:0000:3b:00.0"}}},
		{"eth9", "", nil},
	} {
		got := QueueIRQs(interruptsSample, c.iface, c.pci)
		if !slices.Equal(got, c.want) {
			t.Errorf("QueueIRQs(%s, %s) = %v, want %v", c.iface, c.pci, got, c.want)
		}
	}
}
