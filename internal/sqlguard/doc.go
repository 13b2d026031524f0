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
// Writes, server side: the query runs in a read-only transaction that is
// always rolled back (MySQL and MariaDB also get SET SESSION TRANSACTION READ
// ONLY first, because their DDL commits implicitly and would otherwise run
// outside the transaction). PostgreSQL is spoken with the extended protocol,
// which refuses several statements in one query, and the transaction takes
// its snapshot before the query, after which it can no longer be made
// read-write. MySQL and MariaDB get an EXPLAIN FORMAT=JSON of the query
// first, inside the same transaction: the server's own grammar then refuses
// anything that is not SELECT, WITH, VALUES or DML (DML then fails on the
// read-only transaction). That stops statements a read-only transaction
// lets through there: SET GLOBAL, FLUSH, KILL, SHUTDOWN, and MariaDB's
// "SET STATEMENT tx_read_only=0 FOR DROP TABLE …", which does drop the table
// even in a read-only session.
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
// # What a read-only transaction cannot stop
//
// Grant the DSN's user SELECT on what it needs and nothing else: the server's
// privileges are the only complete defence. Stored routines are covered (the
// EXPLAIN refuses CALL; PostgreSQL refuses a procedure's COMMIT inside our
// transaction block; functions run inside the read-only transaction, so
// their writes fail), but without those privileges:
//   - SELECT … INTO OUTFILE / DUMPFILE and LOAD_FILE() write and read files
//     of the database server for a user with the FILE privilege, and
//     PostgreSQL's pg_read_file(), lo_export() and friends do the same for a
//     superuser or the pg_*_server_files roles;
//   - functions whose effects lie outside the transaction still have them:
//     pg_terminate_backend, pg_cancel_backend, advisory locks (GET_LOCK,
//     pg_advisory_lock), dblink, and the row locks of SELECT … FOR UPDATE;
//   - MySQL's optimizer hint /*+ MAX_EXECUTION_TIME(n) */ overrides the
//     server timeout for one SELECT; only the client deadline then remains,
//     and MySQL does not stop a query when its client disconnects, so the
//     query keeps running on the server (MariaDB's equivalent, SET
//     STATEMENT max_statement_time=0 FOR …, is refused by the EXPLAIN).
package sqlguard
