package sqlguard

// The functions a probe query may call: built-ins that compute a value
// from their arguments, the clock or the database's own rows, and nothing
// else. Absent on purpose: anything that reads or writes files, runs a
// program or another query (query_to_xml, dblink, lo_*, pg_read_file,
// LOAD_FILE), takes a lock that outlives the statement (pg_advisory_*,
// GET_LOCK), signals or reconfigures the server (pg_terminate_backend,
// pg_cancel_backend, pg_reload_conf), sets state (set_config, nextval,
// setval, LAST_INSERT_ID(x)), waits (pg_sleep, SLEEP, BENCHMARK,
// MASTER_POS_WAIT), and every user-defined function.

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// pgAllowedFunctions are PostgreSQL built-ins by their lower-case name,
// unqualified or in pg_catalog (the session puts pg_catalog first in the
// search path, so a tenant's function of the same name is never found
// first).
var pgAllowedFunctions = set(
	// aggregates and window functions
	"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "bit_and", "bit_or", "bit_xor",
	"string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
	"stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp",
	"percentile_cont", "percentile_disc", "mode",
	"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
	"first_value", "last_value", "nth_value",
	// strings
	"length", "char_length", "character_length", "octet_length", "bit_length", "lower", "upper", "initcap",
	"substr", "substring", "left", "right", "btrim", "ltrim", "rtrim", "trim", "lpad", "rpad", "replace",
	"translate", "reverse", "repeat", "concat", "concat_ws", "format", "split_part", "strpos", "position",
	"starts_with", "overlay", "ascii", "chr", "quote_ident", "quote_literal", "quote_nullable",
	"regexp_replace", "regexp_match", "regexp_matches", "regexp_like", "regexp_count", "regexp_substr",
	"regexp_split_to_array", "regexp_split_to_table", "string_to_array", "array_to_string",
	"md5", "sha224", "sha256", "sha384", "sha512", "encode", "decode", "to_hex", "convert_to", "convert_from",
	"normalize", "is_normalized", "unistr",
	// numbers
	"abs", "ceil", "ceiling", "floor", "round", "trunc", "mod", "power", "sqrt", "cbrt", "exp", "ln", "log",
	"log10", "sign", "div", "gcd", "lcm", "width_bucket", "random", "scale", "numeric_inc",
	"to_char", "to_number", "to_date", "to_timestamp",
	// time
	"now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
	"date_trunc", "date_part", "date_bin", "extract", "age", "make_date", "make_time", "make_timestamp",
	"make_timestamptz", "make_interval", "justify_days", "justify_hours", "justify_interval", "isfinite",
	"timezone",
	// arrays, ranges, rows
	"array_length", "array_lower", "array_upper", "array_ndims", "array_dims", "cardinality", "array_position",
	"array_positions", "array_append", "array_prepend", "array_cat", "array_remove", "array_replace",
	"unnest", "generate_series", "generate_subscripts", "lower_inf", "upper_inf", "isempty", "range_merge",
	"num_nulls", "num_nonnulls",
	// json
	"to_json", "to_jsonb", "row_to_json", "array_to_json", "json_build_object", "jsonb_build_object",
	"json_build_array", "jsonb_build_array", "json_object", "jsonb_object", "json_array_length",
	"jsonb_array_length", "json_typeof", "jsonb_typeof", "json_extract_path", "jsonb_extract_path",
	"json_extract_path_text", "jsonb_extract_path_text", "json_array_elements", "jsonb_array_elements",
	"json_array_elements_text", "jsonb_array_elements_text", "json_each", "jsonb_each", "json_each_text",
	"jsonb_each_text", "json_object_keys", "jsonb_object_keys", "jsonb_path_exists", "jsonb_path_query",
	"jsonb_path_query_array", "jsonb_path_query_first", "jsonb_pretty", "jsonb_strip_nulls", "json_strip_nulls",
	// the server's own state, read-only
	"version", "current_database", "current_schema", "current_setting", "pg_is_in_recovery", "pg_last_xact_replay_timestamp",
	"pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn", "pg_current_wal_lsn", "pg_wal_lsn_diff",
	"pg_postmaster_start_time", "pg_conf_load_time", "pg_database_size", "pg_relation_size",
	"pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_size_pretty", "pg_typeof",
	"pg_collation_for", "has_table_privilege", "has_schema_privilege", "has_database_privilege",
	"to_regclass", "to_regtype", "format_type", "obj_description", "col_description",
	// types, conditions
	"coalesce", "nullif", "greatest", "least", "bool", "int4", "int8", "text", "numeric", "float8",
	"date", "gen_random_uuid", "uuid",
)

// mysqlAllowedFunctions are MySQL and MariaDB built-ins by their
// lower-case name as TiDB's parser reports them. Aggregates and window
// functions are separate nodes of that parser, all of them pure.
var mysqlAllowedFunctions = set(
	// strings
	"length", "char_length", "character_length", "octet_length", "bit_length", "lower", "lcase", "upper",
	"ucase", "substring", "substr", "mid", "substring_index", "left", "right", "trim", "ltrim", "rtrim",
	"lpad", "rpad", "replace", "reverse", "repeat", "space", "concat", "concat_ws", "locate", "instr",
	"position", "strcmp", "field", "elt", "find_in_set", "format", "insert", "ascii", "ord", "char",
	"hex", "unhex", "to_base64", "from_base64", "md5", "sha", "sha1", "sha2", "crc32", "quote", "soundex",
	"regexp_replace", "regexp_substr", "regexp_instr", "regexp_like", "bin", "oct", "conv",
	"inet_aton", "inet_ntoa", "inet6_aton", "inet6_ntoa", "is_ipv4", "is_ipv6",
	// numbers
	"abs", "ceil", "ceiling", "floor", "round", "truncate", "mod", "pow", "power", "sqrt", "exp", "ln",
	"log", "log2", "log10", "sign", "pi", "rand", "degrees", "radians", "sin", "cos", "tan", "asin", "acos",
	"atan", "atan2", "cot",
	// time
	"now", "current_timestamp", "localtime", "localtimestamp", "sysdate", "curdate", "current_date",
	"curtime", "current_time", "utc_timestamp", "utc_date", "utc_time", "unix_timestamp", "from_unixtime",
	"date", "time", "year", "month", "monthname", "day", "dayofmonth", "dayname", "dayofweek", "dayofyear",
	"hour", "minute", "second", "microsecond", "week", "weekday", "weekofyear", "yearweek", "quarter",
	"last_day", "date_format", "time_format", "date_add", "date_sub", "adddate", "subdate", "addtime",
	"subtime", "datediff", "timediff", "timestampdiff", "timestampadd", "str_to_date", "convert_tz",
	"makedate", "maketime", "sec_to_time", "time_to_sec", "to_days", "from_days", "to_seconds",
	"period_add", "period_diff", "extract", "timestamp", "get_format",
	// json
	"json_extract", "json_unquote", "json_length", "json_object", "json_array", "json_contains",
	"json_contains_path", "json_valid", "json_type", "json_keys", "json_depth", "json_quote", "json_value",
	"json_search",
	// conditions and conversions
	"if", "ifnull", "nullif", "coalesce", "greatest", "least", "isnull", "interval", "convert", "cast",
	"binary", "uuid", "uuid_short", "extractvalue",
	// the server's own state, read-only
	"version", "database", "schema", "connection_id", "current_user", "user", "session_user", "system_user",
	"current_role",
)
