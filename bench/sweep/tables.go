package sweep

import (
	"fmt"
	"strings"
)

// Table is a markdown table with the heading line it sits under.
type Table struct {
	Title  string     // the nearest "#..." line above, without the hashes
	Header []string   // column names
	Rows   [][]string // cells, trimmed; every row has len(Header) cells
}

// ParseTables reads the pipe tables of a markdown document. A table is a
// header row, a delimiter row (---, ---:) and body rows; a body row with a
// different number of cells is an error, as is a header without delimiter.
func ParseTables(md string) ([]Table, error) {
	var tables []Table
	title := ""
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			title = strings.TrimSpace(strings.TrimLeft(l, "#"))
			continue
		}
		if !strings.HasPrefix(l, "|") {
			continue
		}
		t := Table{Title: title, Header: cells(l)}
		if i+1 >= len(lines) || !isDelimiter(lines[i+1], len(t.Header)) {
			return nil, fmt.Errorf("line %d: table header %q has no delimiter row of %d columns below it", i+1, l, len(t.Header))
		}
		i += 2
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			row := cells(lines[i])
			if len(row) != len(t.Header) {
				return nil, fmt.Errorf("line %d: %d cells, the header has %d: %q", i+1, len(row), len(t.Header), lines[i])
			}
			t.Rows = append(t.Rows, row)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

func cells(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(l, "|")
	l = strings.TrimSuffix(l, "|")
	c := strings.Split(l, "|")
	for i := range c {
		c[i] = strings.TrimSpace(c[i])
	}
	return c
}

func isDelimiter(l string, n int) bool {
	c := cells(l)
	if len(c) != n {
		return false
	}
	for _, x := range c {
		x = strings.Trim(x, ":")
		if len(x) < 3 || strings.Trim(x, "-") != "" {
			return false
		}
	}
	return true
}
