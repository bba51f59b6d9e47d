package benchplot

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnlyTheCommandImportsGonum: gonum/plot is imported here alone, and
// this package by cmd/hirrun alone, so that no library package of hir
// pulls gonum into its users' builds.
func TestOnlyTheCommandImportsGonum(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := map[string][]string{
		"gonum.org/": {"internal/benchplot"},
		"github.com/hirlab/hir/internal/benchplot": {"cmd/hirrun"},
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for prefix, dirs := range allowed {
				if strings.HasPrefix(p, prefix) {
					seen[prefix] = true
					assert.Contains(t, dirs, filepath.ToSlash(dir), "%s imports %s", path, p)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Len(t, seen, 2, "the walk found the imports it looks for")
}
