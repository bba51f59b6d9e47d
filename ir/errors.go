package ir

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Error is a problem found at a place in a program.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Errorf makes an *Error at pos. The message is clipped (ClipMessage): a
// name, word or number quoted from the source keeps at most its first
// MaxQuote bytes, so an error about a 10,000-character identifier stays one
// readable line.
func Errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: ClipMessage(fmt.Sprintf(format, args...))}
}

// Bounds of an error message (ClipMessage).
const (
	// MaxQuote is the longest run of name characters (letters, digits, _ .
	// % + -) a message keeps whole: a longer one (an identifier, value name
	// or number quoted from the source) is cut to its first MaxQuote bytes
	// and "…".
	MaxQuote = 40
	// MaxMessage bounds a whole message in bytes; a longer one (a type of
	// thousands of dims, say) is cut at MaxMessage and ends in "…".
	MaxMessage = 600
)

// ClipMessage bounds msg as Errorf does: every run of name characters longer
// than MaxQuote+8 bytes keeps its first MaxQuote bytes followed by "…", and
// the whole is cut to MaxMessage bytes. The cuts fall on UTF-8 boundaries.
func ClipMessage(msg string) string {
	var b strings.Builder
	clipped := false
	for i := 0; i < len(msg); {
		if !isQuoteChar(msg[i]) {
			j := i + 1
			for j < len(msg) && !isQuoteChar(msg[j]) {
				j++
			}
			b.WriteString(msg[i:j])
			i = j
			continue
		}
		j := i + 1
		for j < len(msg) && isQuoteChar(msg[j]) {
			j++
		}
		if j-i > MaxQuote+8 {
			b.WriteString(cutUTF8(msg[i:j], MaxQuote))
			b.WriteString("…")
			clipped = true
		} else {
			b.WriteString(msg[i:j])
		}
		i = j
	}
	out := msg
	if clipped {
		out = b.String()
	}
	if len(out) > MaxMessage {
		out = cutUTF8(out, MaxMessage-len("…")) + "…"
	}
	return out
}

// isQuoteChar: the bytes of a name, word or number (non-ASCII bytes count,
// so a run of them is cut too).
func isQuoteChar(c byte) bool {
	return c == '_' || c == '.' || c == '%' || c == '+' || c == '-' || c >= 0x80 ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// cutUTF8 is s's first n bytes, less any rune split at the cut.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ErrorList collects several errors; it prints one per line, in source order.
type ErrorList []*Error

// Add appends an error at pos.
func (l *ErrorList) Add(pos Pos, format string, args ...any) {
	*l = append(*l, Errorf(pos, format, args...))
}

// Sort orders the errors by position.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		return l[i].Pos.Less(l[j].Pos)
	})
}

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Err returns nil for an empty list, else the sorted list.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	l.Sort()
	return l
}
