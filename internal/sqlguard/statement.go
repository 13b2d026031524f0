package sqlguard

// A probe statement is checked before anything is sent: it must be one
// SELECT (or WITH … SELECT, or a set operation of SELECTs) made only of
// the constructs and functions on the allow-lists below, as the dialect's
// own parser reads it. What is not known is refused, so a construct added
// in a later server version is refused until someone looks at it.
//
// For PostgreSQL the parser is PostgreSQL's own (libpg_query), and the
// tenant's text is sent as written: the only setting that changes how the
// server splits it into tokens, standard_conforming_strings, is pinned at
// connect time. For MySQL and MariaDB the parser is TiDB's, which reads
// executable comments (/*!…*/, MariaDB's /*M!…*/, TiDB's /*T!…*/) and
// optimizer hints differently from the servers, so the statement is
// re-written from the parse tree (no comments at all) and that text is
// what the server runs: the server executes exactly what was checked.

// statementError refuses a statement. Its text is one of the fixed
// phrases below: neither the query nor any part of it.
type statementError struct{ why string }

func (e *statementError) Error() string { return "query refused before it was sent: " + e.why }

// Fixed phrases of a refused statement.
var (
	errNotParsed     = &statementError{"the dialect's parser could not read it as SQL"}
	errNotOneSelect  = &statementError{"only one SELECT (or WITH … SELECT) statement may run"}
	errNotAllowed    = &statementError{"it uses a construct outside the allow-list of plain SELECT queries"}
	errFunction      = &statementError{"it calls a function outside the allow-list of side-effect-free functions"}
	errCopy          = &statementError{"COPY reads or writes files and programs of the database server"}
	errInto          = &statementError{"SELECT … INTO writes a file, a variable or a table"}
	errLocking       = &statementError{"it locks rows (FOR UPDATE / FOR SHARE)"}
	errHint          = &statementError{"optimizer hints may override the statement timeout"}
	errVariable      = &statementError{"it reads or sets a user or system variable"}
	errParameter     = &statementError{"it has a parameter placeholder, and probes have no parameters"}
	errQualifiedName = &statementError{"it names a function or operator outside pg_catalog"}
)

// checkStatement returns the text to send for query, or a *statementError.
func checkStatement(driverName, query string) (string, error) {
	if driverName == MySQL {
		return checkMySQLStatement(query)
	}
	if err := checkPGStatement(query); err != nil {
		return "", err
	}
	return query, nil
}
