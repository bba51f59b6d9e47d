package editors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(src, v), path)
}

// The VS Code extension points at the grammar and the configuration that
// are there, under the grammar's scope name.
func TestExtensionManifest(t *testing.T) {
	var pkg struct {
		Contributes struct {
			Languages []struct {
				ID            string   `json:"id"`
				Extensions    []string `json:"extensions"`
				Configuration string   `json:"configuration"`
			} `json:"languages"`
			Grammars []struct {
				Language  string `json:"language"`
				ScopeName string `json:"scopeName"`
				Path      string `json:"path"`
			} `json:"grammars"`
		} `json:"contributes"`
	}
	readJSON(t, "textmate/package.json", &pkg)
	var g grammar
	readJSON(t, grammarPath, &g)
	require.Len(t, pkg.Contributes.Languages, 1, "languages")
	require.Len(t, pkg.Contributes.Grammars, 1, "grammars")
	lang, gr := pkg.Contributes.Languages[0], pkg.Contributes.Grammars[0]
	assert.Equal(t, []string{".hir"}, lang.Extensions, "extensions")
	assert.Equal(t, lang.ID, gr.Language, "the grammar's language")
	assert.Equal(t, g.ScopeName, gr.ScopeName, "scope name")
	assert.Equal(t, grammarPath, filepath.ToSlash(filepath.Join("textmate", gr.Path)), "grammar path")
	assert.FileExists(t, filepath.Join("textmate", lang.Configuration), "language configuration")
}

// Comments, brackets, indentation and words as the text format has them
// (docs/LANGUAGE.md, "Lexical rules").
func TestLanguageConfiguration(t *testing.T) {
	var conf struct {
		Comments struct {
			LineComment string `json:"lineComment"`
		} `json:"comments"`
		Brackets         [][2]string `json:"brackets"`
		IndentationRules struct {
			Increase string `json:"increaseIndentPattern"`
			Decrease string `json:"decreaseIndentPattern"`
		} `json:"indentationRules"`
		WordPattern string `json:"wordPattern"`
	}
	readJSON(t, "textmate/language-configuration.json", &conf)
	assert.Equal(t, "//", conf.Comments.LineComment, "line comment")
	assert.Equal(t, [][2]string{{"[", "]"}, {"{", "}"}}, conf.Brackets, "brackets")

	increase := regexp.MustCompile(conf.IndentationRules.Increase)
	for _, line := range []string{"for %i = 0 to 4 {", "%y = fusion %x : f32[8/DIDx] { // body"} {
		assert.True(t, increase.MatchString(line), "a body opens after %q", line)
	}
	assert.False(t, increase.MatchString("%y = relu %x // {"), "a { in a comment opens nothing")
	assert.True(t, regexp.MustCompile(conf.IndentationRules.Decrease).MatchString("  }"), "a } line closes a body")

	words := regexp.MustCompile(conf.WordPattern).FindAllString("%x.sym_1 = mul %x, -2.0 : f32[8/DIDx]", -1)
	assert.Equal(t, []string{"%x.sym_1", "mul", "%x", "-2.0", "f32", "8", "DIDx"}, words, "words")
}
