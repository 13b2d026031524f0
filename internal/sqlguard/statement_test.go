package sqlguard

import (
	"strings"
	"testing"
)

// Probe queries as tenants write them pass the statement check; the
// rejected ones get their fixed phrase. Real servers run what passes in
// the other tests; this one covers the grammar.
func TestStatementCheck(t *testing.T) {
	allowed := map[string][]string{
		Postgres: {
			"SELECT 1",
			"select count(*), max(updated_at) from orders where updated_at > now() - interval '1 hour'",
			"WITH recent AS (SELECT id FROM t WHERE ts > current_timestamp - '5 min'::interval) SELECT count(*) FROM recent",
			"SELECT a.id, b.name FROM a JOIN b ON a.id = b.a_id WHERE b.name LIKE 'x%' ORDER BY 1 LIMIT 10",
			"SELECT md5(string_agg(id::text, ',' ORDER BY id)) FROM t",
			"SELECT 1 UNION ALL SELECT 2",
			"SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END, coalesce(NULL, 1), greatest(1, 2)",
			"SELECT extract(epoch FROM now()), substring('abc' FROM 2), trim(both ' ' from ' x ')",
			"SELECT x FROM generate_series(1, 3) AS g(x) WHERE EXISTS (SELECT 1)",
			"SELECT pg_catalog.lower('A') /* a comment */ -- and another",
			"SELECT row_number() OVER (PARTITION BY a ORDER BY b) FROM t",
		},
		MySQL: {
			"SELECT 1",
			"select count(*), max(updated_at) from orders where updated_at > now() - interval 1 hour",
			"SELECT seq, REPEAT('x', 10) FROM seq_1_to_10",
			"WITH r AS (SELECT id FROM t) SELECT COUNT(*) FROM r",
			"SELECT a.id, b.name FROM a LEFT JOIN b ON a.id = b.a_id WHERE b.name LIKE 'x%' GROUP BY a.id HAVING COUNT(*) > 1 ORDER BY 1 LIMIT 10",
			"SELECT MD5(GROUP_CONCAT(id ORDER BY id)) FROM t",
			"SELECT 1 UNION SELECT 2",
			"SELECT IF(a > 1, 'y', 'n'), IFNULL(b, 0), DATE_FORMAT(NOW(), '%Y') FROM t",
			"SELECT CAST(x AS CHAR), CONVERT(x, SIGNED) FROM t WHERE x IN (SELECT y FROM u)",
			"SELECT 'it''s', \"dq\", 'back\\\\slash' FROM DUAL",
		},
	}
	refused := map[string]map[string]*statementError{
		Postgres: {
			"":                          errNotOneSelect,
			"SELECT 1; SELECT 2":        errNotOneSelect,
			"SELECT (":                  errNotParsed,
			"EXPLAIN ANALYZE SELECT 1":  errNotOneSelect,
			"COPY t TO STDOUT":          errCopy,
			"SELECT * INTO t2 FROM t":   errInto,
			"SELECT * FROM t FOR SHARE": errLocking,
			"SELECT $1":                 errParameter,
			"SELECT myschema.f()":       errQualifiedName,
			"SELECT f()":                errFunction,
			"SELECT nextval('s')":       errFunction,
			"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d": errNotAllowed,
			"VALUES (pg_advisory_lock(1))":                          errFunction,
			"SELECT * FROM t TABLESAMPLE SYSTEM (1)":                errNotAllowed,
			"SELECT xmlelement(name a)":                             errNotAllowed,
			"SELECT * FROM dblink('', 'SELECT 1') AS x(a int)":      errFunction,
		},
		MySQL: {
			"SELECT 1; SELECT 2":                    errNotOneSelect,
			"SELECT (":                              errNotParsed,
			"DO GET_LOCK('x', 0)":                   errNotOneSelect,
			"SELECT * FROM t INTO OUTFILE '/tmp/x'": errInto,
			"SELECT * FROM t LOCK IN SHARE MODE":    errLocking,
			"SELECT /*+ MAX_EXECUTION_TIME(0) */ 1": errHint,
			"SELECT @@version":                      errVariable,
			"SELECT ?":                              errParameter,
			"SELECT test.f()":                       errFunction,
			"SELECT RELEASE_ALL_LOCKS()":            errFunction,
			"SELECT MASTER_POS_WAIT('f', 4)":        errFunction,
			"SELECT LAST_INSERT_ID(5)":              errFunction,
			"TABLE t":                               errNotAllowed,
			"VALUES ROW(1)":                         errNotAllowed,
			"SELECT MATCH (a) AGAINST ('x') FROM t": errNotAllowed,
		},
	}
	for _, drv := range []string{Postgres, MySQL} {
		for _, q := range allowed[drv] {
			text, err := checkStatement(drv, q)
			if err != nil {
				t.Errorf("%s %q: %v", drv, q, err)
				continue
			}
			if drv == MySQL {
				// What is sent must itself pass: the re-written text is
				// a fixed point of the check.
				again, err := checkStatement(drv, text)
				if err != nil || again != text {
					t.Errorf("%s %q re-written as %q, which checks as %q, %v", drv, q, text, again, err)
				}
			}
		}
		for q, want := range refused[drv] {
			_, err := checkStatement(drv, q)
			if err != want {
				t.Errorf("%s %q: %v, want %v", drv, q, err, want)
			}
			if err != nil && q != "" && strings.Contains(err.Error(), q) {
				t.Errorf("%s %q: the refusal quotes the query", drv, q)
			}
		}
	}
}
