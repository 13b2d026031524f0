package sqlguard

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	// The parser needs a value driver for literals; this is its
	// self-contained one.
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// mysqlRestoreFlags write the statement back with every string in single
// quotes, quotes doubled and backslashes escaped (so that it reads the
// same whatever NO_BACKSLASH_ESCAPES or ANSI_QUOTES say), names in
// backquotes, and no charset introducers (the connection's charset
// applies, as it did to the tenant's text).
const mysqlRestoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes | format.RestoreStringWithoutCharset

// checkMySQLStatement parses query with TiDB's MySQL parser, walks the
// tree against the allow-lists and returns the statement re-written from
// the tree: the text the server runs.
func checkMySQLStatement(query string) (string, error) {
	stmts, _, err := parseMySQL(query)
	if err != nil {
		return "", errNotParsed
	}
	if len(stmts) != 1 {
		return "", errNotOneSelect
	}
	switch stmts[0].(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
	default:
		return "", errNotOneSelect
	}
	v := &mysqlChecker{}
	stmts[0].Accept(v)
	if v.err != nil {
		return "", v.err
	}
	var b strings.Builder
	if err := stmts[0].Restore(format.NewRestoreCtx(mysqlRestoreFlags, &b)); err != nil {
		return "", errNotAllowed
	}
	return b.String(), nil
}

// parseMySQL never lets a parser panic take the manager down.
func parseMySQL(query string) (stmts []ast.StmtNode, warns []error, err error) {
	defer func() {
		if recover() != nil {
			stmts, warns, err = nil, nil, errNotParsed
		}
	}()
	return parser.New().ParseSQL(query)
}

type mysqlChecker struct{ err error }

func (v *mysqlChecker) Enter(n ast.Node) (ast.Node, bool) {
	if v.err == nil {
		v.err = checkMySQLNode(n)
	}
	return n, v.err != nil
}

func (v *mysqlChecker) Leave(n ast.Node) (ast.Node, bool) { return n, v.err == nil }

func checkMySQLNode(n ast.Node) error {
	switch n := n.(type) {
	case *ast.SelectStmt:
		return checkMySQLSelect(n)
	case *ast.TableName:
		if n.TableSample != nil || n.AsOf != nil {
			return errNotAllowed
		}
	case *ast.FuncCallExpr:
		if n.Schema.L != "" || !mysqlAllowedFunctions[n.FnName.L] {
			return errFunction
		}
	case *ast.VariableExpr:
		return errVariable
	case *test_driver.ParamMarkerExpr:
		return errParameter
	case *ast.SetOprStmt, *ast.SetOprSelectList, *ast.WithClause, *ast.CommonTableExpression,
		*ast.FieldList, *ast.SelectField, *ast.WildCardField, *ast.TableRefsClause, *ast.Join,
		*ast.TableSource, *ast.OnCondition, *ast.ColumnNameExpr, *ast.ColumnName, *test_driver.ValueExpr,
		*ast.BinaryOperationExpr, *ast.UnaryOperationExpr, *ast.ParenthesesExpr, *ast.IsNullExpr,
		*ast.IsTruthExpr, *ast.BetweenExpr, *ast.PatternInExpr, *ast.PatternLikeOrIlikeExpr,
		*ast.PatternRegexpExpr, *ast.CaseExpr, *ast.WhenClause, *ast.SubqueryExpr, *ast.CompareSubqueryExpr,
		*ast.ExistsSubqueryExpr, *ast.RowExpr, *ast.AggregateFuncExpr, *ast.WindowFuncExpr, *ast.WindowSpec,
		*ast.PartitionByClause, *ast.FrameClause, *ast.FrameBound, *ast.GroupByClause, *ast.HavingClause,
		*ast.ByItem, *ast.OrderByClause, *ast.Limit, *ast.FuncCastExpr, *ast.TimeUnitExpr,
		*ast.TrimDirectionExpr, *ast.GetFormatSelectorExpr, *ast.PositionExpr, *ast.SetCollationExpr:
	default:
		return errNotAllowed
	}
	return nil
}

func checkMySQLSelect(s *ast.SelectStmt) error {
	switch {
	case s.Kind != ast.SelectStmtKindSelect:
		return errNotAllowed
	case s.SelectIntoOpt != nil:
		return errInto
	case s.LockInfo != nil && s.LockInfo.LockType != ast.SelectLockNone:
		return errLocking
	case len(s.TableHints) > 0:
		return errHint
	}
	return nil
}
