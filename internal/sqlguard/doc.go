// Package sqlguard runs one SQL query for an untrusted tenant and fingerprints
// its result set. The tenant chooses both the DSN and the query, so every
// byte of either is treated as hostile, and so is the database server.
//
// # Defences and what each relies on
//
// DSN, client side: the driver's own parser reads the DSN, every parameter is
// checked against an allow-list before anything else happens, and the
// connection is built from a fresh configuration holding only allowed fields.
// Nothing that reads the manager's files (LOAD DATA LOCAL, passfile,
// servicefile, client certificates, registered TLS configurations), widens
// what one statement can do (multiStatements, interpolateParams, system
// variables, PostgreSQL runtime parameters) or weakens the byte limits
// (compression) gets through. For PostgreSQL the environment of the manager
// (PGPASSWORD, PGPASSFILE, PGOPTIONS, PGHOST, ~/.pgpass, ~/.postgresql/*) is
// kept out as well: a password is sent only when the tenant's string has one,
// client certificates are dropped, runtime parameters are ours alone, and the
// host must be explicit.
//
// Network, caller side: every connection is made by Options.Dial, which
// decides which addresses a tenant may reach; unix sockets additionally need
// their exact path in Options.AllowUnixSockets.
//
// Statements, client side: before anything is sent (no connection is
// made), the statement is parsed by a real parser of its dialect and
// checked against allow-lists of constructs and side-effect-free
// functions (statement.go); PostgreSQL's text is sent as written,
// MySQL's as re-written from the tree, so executable comments the parser
// skipped never run.
//
// Users, server side: every query gets a new session, and before the query
// the user's powers are checked: superusers, server file/program/signal
// roles, MySQL privileges beyond SELECT, grant options and roles are
// refused (privileges.go) unless Options.AllowPowerfulUser.
//
// Writes, server side: the query runs in a read-only transaction that is
// always rolled back (MySQL and MariaDB also get SET SESSION TRANSACTION READ
// ONLY first, because their DDL commits implicitly and would otherwise run
// outside the transaction). PostgreSQL is spoken with the extended protocol,
// which refuses several statements in one query, and the transaction takes
// its snapshot before the query, after which it can no longer be made
// read-write. MySQL and MariaDB get an EXPLAIN FORMAT=JSON of the query
// first, inside the same transaction: the server's own grammar then refuses
// anything that is not SELECT, WITH, VALUES or DML (DML then fails on the
// read-only transaction).
//
// Time, both sides: a server-side statement timeout (statement_timeout,
// max_statement_time or max_execution_time) and a client-side context
// deadline a little longer than it.
//
// Memory, client side: rows are counted and sized while they stream, and the
// connection itself refuses to read more than about twice the result limit
// per query, so neither a huge row nor a huge result is ever fully buffered.
// PostgreSQL messages longer than the row limit are refused from their
// 5-byte header, before their body is allocated. The MySQL driver reads one
// packet of up to 16 MiB into memory before handing it over, so a MySQL
// query can still cost one such buffer.
//
// Messages, client side: errors returned by this package carry a fixed
// phrase plus at most a numeric code or SQLSTATE, never a driver's message,
// a DSN part or a value. The raw driver error is not kept.
//
// # What the checks cannot see
//
// Grant the DSN's user SELECT on what it needs and nothing else: a view, a
// rule, a trigger, an operator or a cast of someone else's runs with that
// user's privileges when the query touches it, and the statement check
// does not see inside them. What such code can still do without the
// refused powers: take locks until the session ends (right after the
// query), wait until the timeout, cancel its own user's other sessions,
// call dblink where the extension is installed.
package sqlguard
