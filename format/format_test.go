package format

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
)

var update = flag.Bool("update", false, "rewrite format/testdata/*.golden")

// shippedFiles is every .hir file of the repository, by path from the
// module's root.
func shippedFiles(t testing.TB) map[string][]byte {
	files := map[string][]byte{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".hir") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(strings.TrimPrefix(path, "../"))] = src
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// layout is what formatting must keep of a source's text, line by line:
// "S" for a statement, "T text" for the comment that ends a statement's
// line, "C text" for a line that holds a comment alone. (Blank lines,
// spacing and the statements' own text are the formatter's to change.)
// The first // of a line starts its comment: the text format has no
// strings, and no token holds two slashes.
func layout(src []byte) []string {
	var out []string
	for _, line := range strings.Split(string(src), "\n") {
		code, comment := line, ""
		if i := strings.Index(line, "//"); i >= 0 {
			code, comment = line[:i], strings.TrimRight(line[i:], " \t\r")
		}
		switch {
		case strings.Trim(code, " \t\r") == "":
			if comment != "" {
				out = append(out, "C "+comment)
			}
		case comment != "":
			out = append(out, "S", "T "+comment)
		default:
			out = append(out, "S")
		}
	}
	return out
}

// checkFormat formats src, which parses, and fails unless the result is
// formatted (formatting it again changes nothing), keeps every comment in
// its place among the statements, and parses to the same program.
func checkFormat(t *testing.T, name string, src []byte) []byte {
	t.Helper()
	out, err := Source(name, src)
	require.NoError(t, err, "%s: Source", name)
	again, err := Source(name, out)
	require.NoError(t, err, "%s: Source of its own output:\n%s", name, out)
	if diff := cmp.Diff(string(out), string(again)); diff != "" {
		t.Fatalf("%s: formatting twice changes the text (-once +twice):\n%s", name, diff)
	}
	if diff := cmp.Diff(layout(src), layout(out)); diff != "" {
		t.Fatalf("%s: comments moved or lost (-source +formatted):\n%s\nformatted:\n%s", name, diff, out)
	}
	before, err := parser.ParseSource(name, src, parser.ParseComments)
	require.NoError(t, err)
	after, err := parser.ParseSource(name, out, parser.ParseComments)
	require.NoError(t, err)
	if diff := cmp.Diff(before.Program.String(), after.Program.String()); diff != "" {
		t.Fatalf("%s: the formatted text is another program (-source +formatted):\n%s", name, diff)
	}
	texts := func(cs []parser.Comment) (s []string) {
		for _, c := range cs {
			s = append(s, c.Text)
		}
		return s
	}
	if diff := cmp.Diff(texts(before.Comments), texts(after.Comments)); diff != "" {
		t.Fatalf("%s: comments differ (-source +formatted):\n%s", name, diff)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		assert.Equal(t, strings.TrimRight(line, " \t\r"), line, "%s: formatted line %d ends in spaces", name, i+1)
	}
	assert.NotContains(t, string(out), "\n\n\n", "%s: two blank lines in a row", name)
	return out
}

// TestShippedFiles formats every .hir file of the repository. (They are
// not rewritten: goldens elsewhere quote their positions.)
func TestShippedFiles(t *testing.T) {
	files := shippedFiles(t)
	require.Greater(t, len(files), 150, "found too few .hir files")
	formatted, commented := 0, 0
	for name, src := range files {
		prog, perr := parser.Parse(name, src)
		if perr != nil {
			// A program the parser rejects (testdata of error messages) is
			// not formatted either, with the parser's errors.
			_, err := Source(name, src)
			require.Error(t, err, name)
			assert.Equal(t, perr.Error(), err.Error(), name)
			continue
		}
		checkFormat(t, name, src)
		formatted++
		if bytes.Contains(src, []byte("//")) {
			commented++
		}
		// The canonical form of a program is formatted: what ir.Print
		// writes, format leaves alone.
		printed := []byte(prog.String())
		out, err := Source(name, printed)
		require.NoError(t, err)
		assert.Equal(t, string(printed), string(out), "%s: format changes ir.Print's text", name)
	}
	t.Logf("formatted %d files (%d with comments) of %d", formatted, commented, len(files))
	assert.Greater(t, commented, 100)
}

// goldens are formatted by TestGolden: the testdata of this package and a
// few shipped files of different kinds.
var goldens = map[string]string{
	"comments":      "format/testdata/comments.hir",
	"no_comments":   "format/testdata/no_comments.hir",
	"crlf_tab":      "format/testdata/crlf_tab.hir",
	"quickstart":    "examples/quickstart.hir",
	"import":        "passes/testdata/symmetric/import.hir",
	"mutant_19":     "testdata/contract/mutant_19.hir",
	"for_pipeline":  "testdata/for_pipeline.hir",
	"fusion_bodies": "passes/testdata/fuse/loop.hir",
}

// TestGolden compares the formatted text of a few files with
// testdata/NAME.golden; -update rewrites them.
func TestGolden(t *testing.T) {
	for name, path := range goldens {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("..", path))
			require.NoError(t, err)
			got := checkFormat(t, path, src)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./format -run Golden -update")
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s formatted differs from %s (-want +got):\n%s", path, golden, diff)
			}
		})
	}
}

func TestWithoutComments(t *testing.T) {
	// A program without comments or blank lines (but the mesh's) is
	// printed as ir.Print prints it; other blank lines are kept, one of a
	// run.
	src := "mesh   2\ninput %x:f32[4/DIDx,3]\n%y=relu %x\n\n\n%z=neg %y\noutput %z\n"
	out, err := Source("p.hir", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, "mesh 2\n\ninput %x : f32[4/DIDx, 3]\n%y = relu %x\n\n%z = neg %y\noutput %z\n", string(out))
	prog, err := parser.Parse("p.hir", []byte(strings.ReplaceAll(src, "\n\n\n", "\n")))
	require.NoError(t, err)
	out, err = Source("p.hir", []byte(strings.ReplaceAll(src, "\n\n\n", "\n")))
	require.NoError(t, err)
	assert.Equal(t, prog.String(), string(out))

	// A mesh alone: as ir.Print writes it, and with a comment after it.
	out, err = Source("p.hir", []byte("mesh 2"))
	require.NoError(t, err)
	assert.Equal(t, "mesh 2\n\n", string(out))
	out, err = Source("p.hir", []byte("mesh 2\n\n\n// end\n\n"))
	require.NoError(t, err)
	assert.Equal(t, "mesh 2\n\n// end\n", string(out))
}

func TestErrors(t *testing.T) {
	_, err := Source("bad.hir", []byte("mesh 2\ninput %x : f33[2] // a comment\n"))
	require.Error(t, err)
	var list ir.ErrorList
	require.ErrorAs(t, err, &list)
	assert.Equal(t, "bad.hir:2:12: unknown dtype \"f33\" (did you mean f32?)", err.Error())

	// A File without what ParseComments records cannot be placed: an
	// error, not a panic or a misplaced comment.
	src := []byte("mesh 2\ninput %x : f32[2]\nfor %i = 0 to 2 {\n}\noutput %x\n")
	f, err := parser.ParseSource("p.hir", src, 0)
	require.NoError(t, err)
	_, err = File(f)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "parser.ParseComments")
}

// sprinkle adds comments and blank lines to src as recipe says, two
// bytes a change: what (a comment line, indented or not, a trailing
// comment, a blank line, an odd comment) and before which line. Comments
// and blank lines mean nothing to the parser, so the text parses if src
// does, to the same program.
func sprinkle(src, recipe []byte) []byte {
	lines := strings.Split(string(src), "\n")
	for k := 0; k+1 < len(recipe); k += 2 {
		what, at := recipe[k], int(recipe[k+1])%len(lines)
		c := "// c" + strconv.Itoa(k/2)
		switch what % 5 {
		case 0:
			lines = slices.Insert(lines, at, strings.Repeat(" ", int(what/5%4))+c)
		case 1:
			lines[at] += " " + c
		case 2:
			lines = slices.Insert(lines, at, "")
		case 3:
			lines[at] += "\t//\t" + c + "//x \r"
		case 4:
			lines = slices.Insert(lines, at, "\t"+c, "   ", c)
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// FuzzFormat: formatting any text the parser accepts gives text that parses
// to the same program, with every comment where it was, and that formatting
// again leaves alone; text the parser rejects is rejected with its errors.
// Nothing panics. Each input is tried as it is and with comments and blank
// lines sprinkled over it (recipe), so that mutations of the repository's
// programs that still parse are commented every which way.
func FuzzFormat(f *testing.F) {
	recipes := [][]byte{nil, {0, 3, 1, 3, 2, 5, 3, 7, 4, 1, 5, 0, 1, 255}, {4, 0, 4, 200, 1, 9, 1, 10, 1, 11}}
	k := 0
	for _, src := range shippedFiles(f) {
		f.Add(src, recipes[k%len(recipes)])
		k++
	}
	for _, s := range []string{
		"// a\nmesh 2 // b\n// c\n\n\n// d\n",
		"mesh 2\ninput %x : f32[4]\nfor %i = 0 to 2 { // h\n// in\n}// out\n// end\n",
		"mesh 2\ninput %x : f32[4]\n%a, %b = fusion %x { //\n  %c = relu %x //x\n  yield %c, %c\n\n  //\n}\noutput %a\n//",
		"mesh 2\r\n// \r\n\r\n%a = barrier\r\n",
	} {
		f.Add([]byte(s), recipes[1])
	}
	f.Fuzz(func(t *testing.T, src, recipe []byte) {
		for _, text := range [][]byte{src, sprinkle(src, recipe)} {
			_, perr := parser.Parse("f.hir", text)
			if perr != nil {
				_, err := Source("f.hir", text)
				if err == nil || err.Error() != perr.Error() {
					t.Fatalf("Source gives %v where Parse gives %v", err, perr)
				}
				continue
			}
			checkFormat(t, "f.hir", text)
		}
	})
}
