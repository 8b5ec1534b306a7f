package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/service/store/postgres"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

// withQuery returns the URL dsn with its query parameter key set to value, or skips t
// when dsn is not a URL.
func withQuery(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skip("AGENTD_TEST_POSTGRES is not a postgres:// URL")
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// openFails opens a store at dsn and returns Open's error, which must be ErrNoSchema.
func openFails(t *testing.T, dsn string) string {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded; want ErrNoSchema")
	}
	if !errors.Is(err, postgres.ErrNoSchema) {
		t.Errorf("Open: %v; want ErrNoSchema", err)
	}
	return err.Error()
}

// A search_path whose schemas are missing, or that the role may not use, fails Open
// with ErrNoSchema naming the schema and the statement that fixes it, never with
// PostgreSQL's "no schema has been selected to create in" (SQLSTATE 3F000). Open
// creates nothing: a misspelt schema would start an empty store beside the real one.
func TestOpenRefusesASearchPathWithNoSchema(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	for _, tc := range []struct {
		name, searchPath string
		want             []string
	}{
		{"missing", schema, []string{"schema " + schema + ", which the search_path (" + schema + ") names, does not exist", "CREATE SCHEMA " + schema + ";"}},
		// "$user" is not a schema to create: the first name that is comes next.
		{"after $user", `"$user",` + schema, []string{"CREATE SCHEMA " + schema + ";"}},
		// PostgreSQL quotes a name that needs it, and so must the advice.
		{"quoted", `"` + strings.ToUpper(schema) + `"`, []string{`CREATE SCHEMA "` + strings.ToUpper(schema) + `";`}},
		{"empty", `""`, []string{"the search_path is empty", "search_path=public"}},
		{"only $user", `"$user"`, []string{`the search_path ("$user") names no schema but the role's own`, "search_path=public"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := openFails(t, withQuery(t, dsn, "search_path", tc.searchPath))
			for _, want := range tc.want {
				if !strings.Contains(msg, want) {
					t.Errorf("Open: %s\nwant it to say %q", msg, want)
				}
			}
			if strings.Contains(msg, "3F000") || strings.Contains(msg, `CREATE SCHEMA "$user"`) {
				t.Errorf("Open: %s\nwant no SQLSTATE 3F000 and no advice to create \"$user\"", msg)
			}
		})
	}
	conn := connect(t, dsn, "public")
	var n int
	must(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE lower(nspname) = $1`, schema).Scan(&n))
	if n != 0 {
		t.Errorf("Open created schema %s", schema)
	}
}

// A schema that exists but that the role has no USAGE on is as good as missing to
// PostgreSQL, which says the same 3F000; Open says which it is, and the GRANT.
func TestOpenRefusesASchemaTheRoleMayNotUse(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	ctx := t.Context()
	admin := connect(t, dsn, "public")
	var b [6]byte
	rand.Read(b[:])
	role := "agentd_test_role_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN`); err != nil {
		t.Skipf("cannot create a role to test with: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		// The schema goes first, at pgtest's cleanup, which runs after this one: drop
		// what the role owns or was granted before dropping the role.
		if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		if _, err := admin.Exec(ctx, `DROP ROLE `+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	must(t, execErr(admin.Exec(ctx, `CREATE SCHEMA `+schema)))

	u, err := url.Parse(withQuery(t, dsn, "search_path", schema))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	msg := openFails(t, u.String())
	for _, want := range []string{"schema " + schema + ", which the search_path (" + schema + ") names, exists, but role " + role + " may not use it", "GRANT USAGE, CREATE ON SCHEMA " + schema + ` TO "` + role + `";`} {
		if !strings.Contains(msg, want) {
			t.Errorf("Open: %s\nwant it to say %q", msg, want)
		}
	}

	// The advice works.
	must(t, execErr(admin.Exec(ctx, `GRANT USAGE, CREATE ON SCHEMA `+schema+` TO `+pgx.Identifier{role}.Sanitize())))
	s, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("Open after the GRANT: %v", err)
	}
	s.Close()
	must(t, execErr(admin.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)))
}

func execErr[T any](_ T, err error) error { return err }
