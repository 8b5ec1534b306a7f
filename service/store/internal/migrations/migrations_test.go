package migrations_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentd/agentd/service/store/internal/migrations"
)

func TestLoad(t *testing.T) {
	ms, err := migrations.Load(fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("B")},
		"m/0001_init.sql": {Data: []byte("A")},
		"m/README":        {Data: []byte("not a migration")},
	}, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[0].SQL != "A" || ms[1].Name != "0002_more.sql" {
		t.Fatalf("Load = %+v, %v", ms, err)
	}
	for name, want := range map[string]string{"m/0002_gap.sql": "want version 1", "m/init.sql": "NNNN_what.sql"} {
		if _, err := migrations.Load(fstest.MapFS{name: {Data: []byte("x")}}, "m"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
}
