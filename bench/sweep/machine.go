package sweep

import (
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where the sweep ran, for the report.
type Machine struct {
	NProc  int    `json:"nproc"`
	CPU    string `json:"cpu"`    // model name from /proc/cpuinfo
	Kernel string `json:"kernel"` // uname -r
}

// ReadMachine reads nproc, the CPU model and the kernel release.
func ReadMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), CPU: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}
