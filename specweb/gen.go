package specweb

import (
	"fmt"
	"os"
	"path/filepath"
)

// Progress is reported after each directory Generate finishes.
type Progress struct {
	Dir, Dirs int   // directories done, of Dirs
	Written   int64 // bytes written so far
	Skipped   int64 // bytes found complete and kept
}

// The tables' file names at the root of a file set.
const (
	PersonalityFile = "User.Personality"
	AdsFile         = "Custom.Ads"
)

// Generate writes dirs directories of the file set under root/file_set, and
// root/User.Personality (users users) and root/Custom.Ads drawn from seed.
// It is resumable: a file already there with the right size is kept; each
// new file is written to a dotted temporary name (which the static path does
// not serve) and renamed into place. progress, if set, is called after each
// directory.
func Generate(root string, dirs int, seed uint64, users int, progress func(Progress)) error {
	if dirs < NumAds/filesPerDirT {
		return fmt.Errorf("generate: %d directories; the ads need at least %d", dirs, NumAds/filesPerDirT)
	}
	if users < 1 || users > MaxUsers {
		return fmt.Errorf("generate: %d users; want 1 to %d", users, MaxUsers)
	}
	var p Progress
	p.Dirs = dirs
	buf := make([]byte, 0, FileSize(Classes-1, FilesPerDir-1))
	for d := range dirs {
		dir := filepath.Join(root, filepath.Dir(FilePath(d, 0, 0)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		for c := range Classes {
			for y := range FilesPerDir {
				name := filepath.Join(root, FilePath(d, c, y))
				size := FileSize(c, y)
				if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(size) {
					p.Skipped += int64(size)
					continue
				}
				buf = AppendFile(buf[:0], d, c, y)
				if err := writeAtomic(name, buf); err != nil {
					return fmt.Errorf("generate: %w", err)
				}
				p.Written += int64(size)
			}
		}
		p.Dir = d + 1
		if progress != nil {
			progress(p)
		}
	}
	t := NewTables(seed, users)
	if err := writeAtomic(filepath.Join(root, PersonalityFile), t.AppendPersonality(nil)); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	if err := writeAtomic(filepath.Join(root, AdsFile), t.AppendAds(nil)); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	return nil
}

// writeAtomic writes data to .name.tmp beside name, then renames it to name,
// so name is either absent or complete.
func writeAtomic(name string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
