package specweb

import (
	"fmt"
	"os"
	"time"
)

// Persist copies the post log to f, off the shards: every interval it
// appends the records published since the last copy, and after a Reset it
// starts the file again. When stop closes it copies what is left, closes f
// and returns; close stop once the server has stopped, and nothing logged
// is lost. f is written from its start.
func (a *App) Persist(f *os.File, every time.Duration, stop <-chan struct{}) error {
	c := &logCopy{f: f}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := c.update(a.state.Load().log); err != nil {
				f.Close()
				return fmt.Errorf("post log: %w", err)
			}
		case <-stop:
			err := c.update(a.state.Load().log)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("post log: %w", err)
			}
			return nil
		}
	}
}

// logCopy is a file that holds the first written records of log.
type logCopy struct {
	f       *os.File
	log     *PostLog
	written int
}

// update brings the file up to date with cur, starting it again when cur
// is a new log (after a Reset).
func (c *logCopy) update(cur *PostLog) error {
	if cur != c.log {
		if err := c.f.Truncate(0); err != nil {
			return err
		}
		if _, err := c.f.Seek(0, 0); err != nil {
			return err
		}
		c.log, c.written = cur, 0
	}
	n := cur.Len()
	for seq := c.written; seq < n; {
		ch := cur.chunks[seq/chunkRecords].Load()
		i := seq % chunkRecords
		end := min(n-seq+i, chunkRecords)
		if _, err := c.f.Write(ch.data[i*RecordLen : end*RecordLen]); err != nil {
			return err
		}
		seq += end - i
		c.written = seq
	}
	return nil
}
