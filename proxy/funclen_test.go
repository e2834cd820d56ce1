package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds the body of every function of proxy and its
// sub-packages, tests aside: a longer one does more than one thing.
const maxFuncLines = 60

// TestFunctionsAreShort fails on a function of proxy/... whose body is over
// maxFuncLines lines.
func TestFunctionsAreShort(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			from, to := fset.Position(fn.Body.Lbrace).Line, fset.Position(fn.Body.Rbrace).Line
			if lines := to - from - 1; lines > maxFuncLines {
				t.Errorf("%s: %s has %d lines, more than %d", fset.Position(fn.Pos()), fn.Name.Name, lines, maxFuncLines)
			}
			return false
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
