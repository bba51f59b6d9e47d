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
	// more counts the errors a full ErrorList dropped after this one, its
	// MaxErrors-th (ErrorList.Count).
	more int
	// pending: Msg is not formatted yet, from format and args (Add).
	pending bool
	format  string
	args    []any
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.message() }

// message is Msg, formatted now if it is pending.
func (e *Error) message() string {
	if e.pending {
		return ClipMessage(fmt.Sprintf(e.format, e.args...))
	}
	return e.Msg
}

// settle formats a pending message.
func (e *Error) settle() {
	if e.pending {
		e.Msg = e.message()
		e.pending, e.format, e.args = false, "", nil
	}
}

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

// MaxErrors bounds an ErrorList: Error prints at most this many errors,
// then "and M more errors", and Add keeps at most this many, those first in
// source order, counting the others without formatting them. So a program
// with an error on each of its million lines costs no more to reject than
// to read, and the errors shown are the ones a list of every error would
// show first.
const MaxErrors = 50

// ErrorList collects several errors; it prints one per line, in source
// order (once sorted, as Err does), at most MaxErrors of them (Add keeps no
// more: the rest are counted, see Count).
//
// A full list (MaxErrors errors kept, some dropped) is sorted, and its last
// error, the MaxErrors-th in source order, carries the count of those
// dropped: an error Add is given after it in source order is only counted.
type ErrorList []*Error

// Add appends an error at pos. Once the list is full it keeps only the
// MaxErrors errors first in source order (ties in the order added), so the
// error is formatted only when it is kept (Keeps says whether it would be).
// Where every argument is a string, a number, a bool or a Pos, values that
// cannot change, the message is formatted only when the list is (Err,
// Error): of errors that come in reverse order, each first of those so
// far, only those kept in the end are.
func (l *ErrorList) Add(pos Pos, format string, args ...any) {
	if !l.Keeps(pos) {
		(*l)[MaxErrors-1].more++
		return
	}
	if basicArgs(args) {
		l.add(&Error{Pos: pos, pending: true, format: format, args: args})
		return
	}
	l.add(Errorf(pos, format, args...))
}

// basicArgs reports whether every argument is of a basic type, or a Pos.
func basicArgs(args []any) bool {
	for _, a := range args {
		switch a.(type) {
		case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, Pos:
		default:
			return false
		}
	}
	return true
}

// Append appends e as Add does: a full list keeps it only if it comes
// before the list's MaxErrors-th error in source order, and else counts it.
func (l *ErrorList) Append(e *Error) {
	if !l.Keeps(e.Pos) {
		(*l)[MaxErrors-1].more += 1 + e.more
		return
	}
	l.add(e)
}

// add adds e, which a full list keeps: among its first MaxErrors, in order
// (the last of them then dropped), or at the end of a list that is not
// full, which is then shrunk if it has grown past MaxErrors.
func (l *ErrorList) add(e *Error) {
	list := *l
	if l.full() {
		i := sort.Search(MaxErrors, func(i int) bool { return e.Pos.Less(list[i].Pos) })
		last := list[MaxErrors-1]
		copy(list[i+1:MaxErrors], list[i:MaxErrors-1])
		list[i] = e
		list[MaxErrors-1].more += 1 + last.more
		return
	}
	*l = append(list, e)
	if len(*l) > MaxErrors {
		l.shrink()
	}
}

// shrink sorts l and keeps its first MaxErrors errors, the last of them
// counting those dropped.
func (l *ErrorList) shrink() {
	list := *l
	list.Sort()
	dropped := 0
	for i, e := range list[MaxErrors:] {
		dropped += 1 + e.more
		list[MaxErrors+i] = nil
	}
	list[MaxErrors-1].more += dropped
	*l = list[:MaxErrors]
}

// drop counts n errors as Add would, given them one by one, each after
// MaxErrors of l's errors in source order (so each would be dropped at
// last): l holds MaxErrors errors.
func (l ErrorList) drop(n int) {
	if n == 0 {
		return
	}
	if !l.full() {
		l.Sort() // as shrink does, when the first of them comes
	}
	l[MaxErrors-1].more += n
}

// full reports whether l has dropped errors: it is then sorted as far as
// its MaxErrors-th error, which counts them.
func (l ErrorList) full() bool { return len(l) >= MaxErrors && l[MaxErrors-1].more > 0 }

// Keeps reports whether Add would keep an error at pos rather than only
// count it: a full list keeps only an error that comes before its
// MaxErrors-th in source order. A caller may skip costly wording (a
// suggestion among every name, say) for an error that is only counted, by
// calling Add with any message.
func (l ErrorList) Keeps(pos Pos) bool {
	return !l.full() || pos.Less(l[MaxErrors-1].Pos)
}

// Count is the number of errors found: those in the list and those Add
// counted without keeping them.
func (l ErrorList) Count() int {
	n := len(l)
	for _, e := range l {
		n += e.more
	}
	return n
}

// Sort orders the errors by position (stably: errors at one position stay
// in the order they were added).
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		return l[i].Pos.Less(l[j].Pos)
	})
}

// Error prints the errors one per line, at most MaxErrors of them, and
// then "and M more errors" when there were more.
func (l ErrorList) Error() string {
	shown := l[:min(len(l), MaxErrors)]
	var b strings.Builder
	for i, e := range shown {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	if more := l.Count() - len(shown); more > 0 {
		if len(shown) > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "and %d more error", more)
		if more > 1 {
			b.WriteByte('s')
		}
	}
	return b.String()
}

// Err returns nil for an empty list, else the sorted list (of at most
// MaxErrors errors, the others counted), every message formatted.
func (l ErrorList) Err() error {
	switch {
	case len(l) == 0:
		return nil
	case len(l) > MaxErrors:
		l.shrink()
	default:
		l.Sort()
	}
	for _, e := range l {
		e.settle()
	}
	return l
}
