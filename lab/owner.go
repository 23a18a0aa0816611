package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownerDir records which process made each lab namespace. A process killed
// outright (SIGKILL on a test timeout) never runs its cleanup, and its
// namespaces and veth pairs would stay forever; with the maker on record, the
// next lab of the same prefix removes them (SweepStale). A namespace with no
// record (one made by `lab up` to outlive its command) is never swept.
var ownerDir = "/run/percore-lab"

// recordOwner notes this process as the maker of namespace name: its pid and
// its start time, so that a later process reusing the pid is not taken for it.
func recordOwner(name string) error {
	start, err := startTime(os.Getpid())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return err
	}
	rec := fmt.Sprintf("%d %d\n", os.Getpid(), start)
	return os.WriteFile(filepath.Join(ownerDir, name), []byte(rec), 0o644)
}

// dropOwner forgets the maker of namespace name.
func dropOwner(name string) {
	os.Remove(filepath.Join(ownerDir, name))
}

// ownerGone reports whether namespace name has a recorded maker that is no
// longer running. No record, or one that cannot be read, is not "gone".
func ownerGone(name string) bool {
	rec, err := os.ReadFile(filepath.Join(ownerDir, name))
	if err != nil {
		return false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(rec), "%d %d", &pid, &start); err != nil || pid <= 0 {
		return false
	}
	now, err := startTime(pid)
	return err != nil || now != start
}

// startTime returns a process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat; proc(5)).
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("lab: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 20 {
		return 0, errors.New("lab: short /proc stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// SweepStale removes the lab namespaces starting with prefix whose recorded
// maker is no longer running, with their veth pairs, and forgets records
// whose namespace is already gone. It returns the namespaces it removed.
func SweepStale(prefix string) ([]string, error) {
	names, err := List(prefix)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, n := range names {
		if ownerGone(n) {
			stale = append(stale, n)
		}
	}
	err = RemoveByName(stale)
	if ents, rerr := os.ReadDir(ownerDir); rerr == nil {
		for _, e := range ents {
			n := e.Name()
			if _, serr := os.Stat(filepath.Join(netnsDir, n)); strings.HasPrefix(n, prefix) && errors.Is(serr, os.ErrNotExist) {
				dropOwner(n)
			}
		}
	}
	return stale, err
}
