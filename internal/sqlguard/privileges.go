package sqlguard

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// ReasonDSNTooPowerful: the DSN's user may do more than a probe needs
// (Options.AllowPowerfulUser accepts it).
const ReasonDSNTooPowerful = "DSNTooPowerful"

// powerError refuses a connection whose user holds a power a probe never
// needs. Its text names the power with a fixed phrase, never a value the
// server sent.
type powerError struct{ power string }

func (e *powerError) Error() string {
	return "the DSN's user is more powerful than a probe needs: " + e.power +
		"; grant it SELECT only (or the admin allows such users with --sql-allow-powerful-users)"
}

// Every connection is new (see Open), so the check runs before each query:
// a grant made since the last one is seen at once.

// pgPowers are the PostgreSQL roles whose members act outside the
// database's own data, with the phrase for each.
var pgPowers = []struct{ role, phrase string }{
	{"pg_execute_server_program", "it may run programs on the database server (pg_execute_server_program)"},
	{"pg_write_server_files", "it may write files of the database server (pg_write_server_files)"},
	{"pg_read_server_files", "it may read files of the database server (pg_read_server_files)"},
	{"pg_signal_backend", "it may cancel and terminate other sessions (pg_signal_backend)"},
}

// pgPowerColumns are the columns of the session's first statement that
// say which powers current_user has: superuser first, then pgPowers.
// Membership counts whether or not it is inherited: SET ROLE reaches it.
func pgPowerColumns() string {
	cols := []string{"COALESCE((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), true)"}
	for _, p := range pgPowers {
		cols = append(cols, fmt.Sprintf("COALESCE((SELECT pg_catalog.pg_has_role(current_user, oid, 'MEMBER') FROM pg_catalog.pg_roles WHERE rolname = '%s'), false)", p.role))
	}
	return strings.Join(cols, ", ")
}

func pgPowerError(powers []bool) error {
	if powers[0] {
		return &powerError{"it is a superuser"}
	}
	for i, p := range pgPowers {
		if powers[i+1] {
			return &powerError{p.phrase}
		}
	}
	return nil
}

// mysqlHarmless are the privileges a probe may hold; any other, at any
// level (global, database, table, column), or any grant option, refuses
// the DSN.
var mysqlHarmless = []string{"SELECT", "SHOW VIEW", "USAGE", "SHOW DATABASES"}

// mysqlPowerPhrases name the privileges the refusal spells out; others
// are summed up.
var mysqlPowerPhrases = map[string]string{
	"FILE":    "it may read and write files of the database server (FILE)",
	"SUPER":   "it may reconfigure the server and end other sessions (SUPER)",
	"PROCESS": "it may see every session's statements (PROCESS)",
}

// mysqlPowerQuery lists what is held beyond mysqlHarmless as the
// server's information_schema shows it to the user: its own grants, and
// everyone's when it may read the grant tables (which is itself more than
// a probe needs, and refused as such).
func mysqlPowerQuery() string {
	harmless := "'" + strings.Join(mysqlHarmless, "','") + "'"
	var parts []string
	for _, view := range []string{"USER_PRIVILEGES", "SCHEMA_PRIVILEGES", "TABLE_PRIVILEGES", "COLUMN_PRIVILEGES"} {
		parts = append(parts, fmt.Sprintf("SELECT GRANTEE, PRIVILEGE_TYPE FROM information_schema.%s "+
			"WHERE PRIVILEGE_TYPE NOT IN (%s) OR IS_GRANTABLE = 'YES'", view, harmless))
	}
	return "SELECT CURRENT_USER(), q.* FROM (" + strings.Join(parts, " UNION ALL ") + ") q LIMIT 256"
}

// mysqlRolesQuery lists the roles granted to the user: their privileges
// are not in the views above, so a user with roles is refused. MySQL
// before 8.0 has neither roles nor this view.
const mysqlRolesQuery = "SELECT COUNT(*) FROM information_schema.APPLICABLE_ROLES"

func (d *DB) checkMySQLPowers(ctx context.Context, conn *sql.Conn) error {
	if err := d.checkMySQLPrivileges(ctx, conn); err != nil {
		return err
	}
	var roles int
	err := conn.QueryRowContext(ctx, mysqlRolesQuery).Scan(&roles)
	if isMySQLError(err, 1109) {
		return nil
	}
	if err != nil {
		return err
	}
	if roles > 0 {
		return &powerError{"it has roles, whose privileges cannot be checked from its session (grant SELECT to the user itself)"}
	}
	return nil
}

func (d *DB) checkMySQLPrivileges(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, mysqlPowerQuery())
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	var found error
	for rows.Next() {
		var user, grantee, priv string
		if err := rows.Scan(&user, &grantee, &priv); err != nil {
			return err
		}
		own := grantee == mysqlGrantee(user)
		if p, ok := mysqlPowerPhrases[strings.ToUpper(priv)]; ok && own {
			return &powerError{p}
		}
		switch {
		case !own:
			found = &powerError{"it may read the grant tables, password hashes included (SELECT on the mysql schema)"}
		case found == nil:
			found = &powerError{"it holds privileges beyond SELECT (writes, DDL, administration or a grant option)"}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return found
}

// mysqlGrantee writes CURRENT_USER() (user@host) the way the privilege
// views name a grantee ('user'@'host'). It only chooses the phrase of a
// refusal, never whether there is one.
func mysqlGrantee(current string) string {
	i := strings.LastIndexByte(current, '@')
	if i < 0 {
		return ""
	}
	return "'" + current[:i] + "'@'" + current[i+1:] + "'"
}
