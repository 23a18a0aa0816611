package httpd

// The output queue: out[outHead:] are the pending slices; outAr tags each
// with the arena it points into, or -1 for a shared prepared response. Two
// arenas alternate so that a connection whose output never fully drains (a
// userspace TCP holding unacknowledged data while pipelined requests keep
// coming) still reuses memory: an arena is rewritten only when no pending
// slice points into it.

// push appends p to the output queue.
func (c *Conn) push(p []byte, tag int8) {
	if len(p) == 0 {
		return
	}
	if len(c.out) == cap(c.out) && c.outHead > 0 {
		n := copy(c.out, c.out[c.outHead:])
		copy(c.outAr, c.outAr[c.outHead:])
		for i := n; i < len(c.out); i++ {
			c.out[i] = nil
		}
		c.out, c.outAr, c.outHead = c.out[:n], c.outAr[:n], 0
	}
	c.out = append(c.out, p)
	c.outAr = append(c.outAr, tag)
	c.outBytes += len(p)
	if tag >= 0 {
		c.arRefs[tag]++
	}
}

// beginArena returns the arena to append a response to and where it starts.
func (c *Conn) beginArena() ([]byte, int) {
	a := c.cur
	switch {
	case c.arRefs[a] == 0:
		c.arenas[a] = c.arenas[a][:0]
	case len(c.arenas[a]) >= arenaLimit:
		o := 1 - a
		if c.arRefs[o] == 0 {
			c.cur = o
			c.arenas[o] = c.arenas[o][:0]
		} else {
			// Both still referenced: leave this one to its readers.
			c.arenas[a] = make([]byte, 0, cap(c.arenas[a]))
		}
	}
	if c.arenas[c.cur] == nil {
		c.arenas[c.cur] = c.srv.takeArena()
		c.arMem[c.cur] = cap(c.arenas[c.cur])
	}
	b := c.arenas[c.cur]
	return b, len(b)
}

// endArena queues b[start:], merging it with the previous slice when that one
// ends right where it begins (pipelined dynamic responses go out as one slice).
// If append moved b to a new array, slices into the old one stay valid: their
// bytes are never written again.
func (c *Conn) endArena(b []byte, start int) {
	c.arenas[c.cur] = b
	if cap(b) != c.arMem[c.cur] {
		c.srv.recharge(&c.arMem[c.cur], b) // append grew it
	}
	end := len(b)
	if n := len(c.out); n > c.outHead && c.outAr[n-1] == c.cur && start > 0 {
		last := c.out[n-1]
		if len(last) > 0 && &last[len(last)-1] == &b[start-1] {
			c.out[n-1] = b[start-len(last) : end : end]
			c.outBytes += end - start
			return
		}
	}
	c.push(b[start:end:end], c.cur)
}
