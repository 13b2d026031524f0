package sqlguard

import (
	"sync"

	// The parse tree's types; the parser itself is pgparser's.
	pgquery "github.com/pganalyze/pg_query_go/v6"
	// libpg_query (PostgreSQL's own parser) compiled to WebAssembly and
	// run by wazero: no cgo, so the manager stays a static binary.
	pgparser "github.com/wasilibs/go-pgquery"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// pgParse runs one parse at a time: each concurrent parse would make the
// parser compile and keep another WebAssembly runtime (about 1.8 s of CPU
// and a transient 270 MB the first time, 30 MB resident after).
var pgParse sync.Mutex

// pgAllowedNodes are the parse-tree nodes a probe query may contain.
// Everything else (COPY, SELECT INTO, FOR UPDATE, parameters, DML in a
// WITH, XML and JSON constructors, TABLESAMPLE, …) is refused.
var pgAllowedNodes = map[protoreflect.Name]bool{
	"ParseResult": true, "RawStmt": true, "Node": true, "List": true,
	"SelectStmt": true, "WithClause": true, "CommonTableExpr": true,
	"ResTarget": true, "ColumnRef": true, "A_Star": true, "Alias": true,
	"RangeVar": true, "JoinExpr": true, "RangeSubselect": true, "RangeFunction": true,
	"String": true, "Integer": true, "Float": true, "Boolean": true, "BitString": true, "A_Const": true,
	"A_Expr": true, "BoolExpr": true, "NullTest": true, "BooleanTest": true,
	"CaseExpr": true, "CaseWhen": true, "CoalesceExpr": true, "MinMaxExpr": true,
	"SubLink": true, "TypeCast": true, "TypeName": true, "CollateClause": true,
	"FuncCall": true, "SQLValueFunction": true, "SortBy": true, "WindowDef": true,
	"A_ArrayExpr": true, "A_Indices": true, "A_Indirection": true, "RowExpr": true,
	"GroupingSet": true,
}

// pgRefusals give the known dangerous nodes their own phrase.
var pgRefusals = map[protoreflect.Name]*statementError{
	"CopyStmt":      errCopy,
	"IntoClause":    errInto,
	"LockingClause": errLocking,
	"ParamRef":      errParameter,
}

// checkPGStatement parses query with PostgreSQL's own parser and walks
// every node of the tree against the allow-lists.
func checkPGStatement(query string) error {
	pgParse.Lock()
	tree, err := pgparser.Parse(query)
	pgParse.Unlock()
	if err != nil {
		return errNotParsed
	}
	if len(tree.GetStmts()) != 1 {
		return errNotOneSelect
	}
	stmt := tree.GetStmts()[0].GetStmt()
	if stmt.GetCopyStmt() != nil {
		return errCopy
	}
	if stmt.GetSelectStmt() == nil {
		return errNotOneSelect
	}
	return walkPG(tree.ProtoReflect())
}

func walkPG(m protoreflect.Message) error {
	name := m.Descriptor().Name()
	if !pgAllowedNodes[name] {
		if e, ok := pgRefusals[name]; ok {
			return e
		}
		return errNotAllowed
	}
	if err := checkPGNode(m.Interface()); err != nil {
		return err
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = walkPG(l.Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			err = walkPG(v.Message())
		}
		return err == nil
	})
	return err
}

// checkPGNode checks the names a node calls: functions against the
// allow-list, operators only from pg_catalog.
func checkPGNode(n protoreflect.ProtoMessage) error {
	switch n := n.(type) {
	case *pgquery.FuncCall:
		schema, name, ok := pgName(n.GetFuncname())
		if !ok || (schema != "" && schema != "pg_catalog") {
			return errQualifiedName
		}
		if !pgAllowedFunctions[name] {
			return errFunction
		}
	case *pgquery.A_Expr:
		if schema, _, ok := pgName(n.GetName()); !ok || (schema != "" && schema != "pg_catalog") {
			return errQualifiedName
		}
	}
	return nil
}

// pgName splits a possibly qualified name of one or two parts.
func pgName(parts []*pgquery.Node) (schema, name string, ok bool) {
	switch len(parts) {
	case 1:
		return "", parts[0].GetString_().GetSval(), true
	case 2:
		return parts[0].GetString_().GetSval(), parts[1].GetString_().GetSval(), true
	}
	return "", "", false
}
