package passes

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hirlab/hir/parser"
)

// TestRelativeShortcutAgreesWithReplay: on random programs of sends and
// recvs with relative peers, Check says the same with and without
// relativePairsAgree's shortcut.
func TestRelativeShortcutAgreesWithReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"f32[4]", "f32[8]", "i32[4]", "f32[8/DIDx]"}
	peers := []string{"+1", "-1", "+2", "-3", "+0", "+4"}
	accepted := 0
	for i := range 1500 {
		var b strings.Builder
		size := 1 + rng.IntN(4)
		fmt.Fprintf(&b, "mesh %d\ninput %%x : f32[4]\n%%st = stream\n", size)
		// pairs of a send of offset d and a recv of -d, now and then of
		// another type or alone, in random order
		var lines []string
		for k := range 1 + rng.IntN(4) {
			typ := types[rng.IntN(len(types))]
			peer := peers[rng.IntN(len(peers))]
			back := strings.NewReplacer("+", "-", "-", "+").Replace(peer)
			send := fmt.Sprintf("%%s%d = alloc : %s\nset_stream %%st\nsend %%s%d peer=%s\nset_stream\n", k, typ, k, peer)
			if rng.IntN(8) == 0 {
				typ = types[rng.IntN(len(types))]
			}
			recv := fmt.Sprintf("%%r%d = recv peer=%s : %s\n", k, back, typ)
			switch rng.IntN(10) {
			case 0:
				lines = append(lines, send)
			case 1:
				lines = append(lines, recv)
			default:
				lines = append(lines, send, recv)
			}
		}
		rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
		b.WriteString(strings.Join(lines, ""))
		b.WriteString("output %x\n")
		check := func() string {
			prog, err := parser.Parse("p.hir", []byte(b.String()))
			if err != nil {
				return "parse: " + err.Error()
			}
			if err := Check(prog, &Context{Verified: true}); err != nil {
				return err.Error()
			}
			return ""
		}
		with := check()
		relativeShortcut = false
		without := check()
		relativeShortcut = true
		if with != without {
			t.Fatalf("program %d:\n%s\nwith the shortcut: %q\nwithout: %q", i, b.String(), with, without)
		}
		if with == "" {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("no program was accepted: the test checks nothing")
	}
	t.Logf("%d of 1500 accepted", accepted)
}
