// Package migrations reads the versioned schema migrations a store on disk embeds: one
// SQL file a step, applied once and recorded, in the order of their versions.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Migration is one step of a schema.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations of fsys's dir in order. Their files are named
// NNNN_what.sql and numbered from 1 with no gap, so that the highest version applied
// says exactly which steps a database has had.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name is not NNNN_what.sql", base)
		}
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(text)})
	}
	// fs.Glob returns names sorted, and the zero-padded numbers sort with them.
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d", m.Name, i+1)
		}
	}
	return ms, nil
}
