package sqlguard

import "sync"

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
// The verdict depends on the text alone, so it is kept: a policy's query is
// parsed once, not at every period.
func checkStatement(driverName, query string) (string, error) {
	key := verdictKey{driverName, query}
	if v, ok := verdicts.get(key); ok {
		return v.text, v.err
	}
	var v verdict
	if driverName == MySQL {
		v.text, v.err = checkMySQLStatement(query)
	} else if v.err = checkPGStatement(query); v.err == nil {
		v.text = query
	}
	verdicts.put(key, v)
	return v.text, v.err
}

// LoadParsers loads the statement parsers now rather than at the first
// query: PostgreSQL's takes about 1.8 s of CPU and a transient 270 MB of
// heap to load, once per process.
func LoadParsers() {
	_, _ = checkStatement(Postgres, "SELECT 1")
	_, _ = checkStatement(MySQL, "SELECT 1")
}

type verdictKey struct{ driver, query string }

type verdict struct {
	text string
	err  error
}

// verdictCache keeps the verdicts of up to maxVerdicts queries; when full
// it starts over (the queries of the running policies come back at once).
type verdictCache struct {
	mu sync.Mutex
	m  map[verdictKey]verdict
}

const maxVerdicts = 4096

var verdicts verdictCache

func (c *verdictCache) get(k verdictKey) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *verdictCache) put(k verdictKey, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxVerdicts {
		c.m = map[verdictKey]verdict{}
	}
	c.m[k] = v
}
