package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A namespace whose recorded maker is gone is swept; one whose maker runs,
// and one disowned, are kept.
func TestSweepStale(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	id := uniqueID()
	mk := func(suffix string) *NS {
		ns, err := NewNS(Name("sw", id, suffix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Delete() })
		return ns
	}
	dead, live, kept := mk("d-cli"), mk("l-cli"), mk("k-cli")
	kept.Disown()
	// The same pid with another start time: the pid reused by a new process.
	start, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf("%d %d\n", os.Getpid(), start+1)
	if err := os.WriteFile(filepath.Join(ownerDir, dead.Name), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}

	swept, err := SweepStale(Name("sw", id, ""))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(swept, []string{dead.Name}) {
		t.Fatalf("swept %v, want [%s]", swept, dead.Name)
	}
	for _, ns := range []*NS{dead, live, kept} {
		_, err := os.Stat(filepath.Join(netnsDir, ns.Name))
		if exists := err == nil; exists == (ns == dead) {
			t.Errorf("%s: exists %v after the sweep", ns.Name, exists)
		}
	}
	if _, err := os.Stat(filepath.Join(ownerDir, dead.Name)); !os.IsNotExist(err) {
		t.Errorf("record of the swept namespace left: %v", err)
	}
}
