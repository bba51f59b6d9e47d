package format

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLanguageDoc: the example of docs/LANGUAGE.md, "Comments and
// formatting", is what Source does.
func TestLanguageDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/LANGUAGE.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "## Comments and formatting\n")
	require.True(t, ok, "LANGUAGE.md has no section Comments and formatting")
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```\n(.*?)```\n").FindAllStringSubmatch(section, -1)
	require.Len(t, blocks, 2, "the section's example: a program, then it formatted")
	got, err := Source("doc.hir", []byte(blocks[0][1]))
	require.NoError(t, err)
	assert.Equal(t, blocks[1][1], string(got))
}
