package evaluator_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hirlab/hir/evaluator"
	"github.com/hirlab/hir/format"
	"github.com/hirlab/hir/host"
	"github.com/hirlab/hir/ir"
	"github.com/hirlab/hir/parser"
	"github.com/hirlab/hir/passes"
	"github.com/hirlab/hir/runtime"
)

// Views as operands of communication (docs/SEMANTICS.md, "Views and
// communication"). Every case is a program that hands a view to a
// collective, a send or recv, or a transfer, and its reference: the same
// program with the view first copied into a tensor of its own (or, for an
// output buffer, the result copied into the view after). Either the checker
// rejects the program with a message naming the view, or it runs and gives
// exactly the reference's outputs on every rank.

// viewOperand is a view of a program input, of a known local layout.
type viewOperand struct {
	name  string
	defs  string // lines defining %V
	shape []int64
	shard int // the sharded axis, -1 for none
	// contiguousView marks views of a symmetric_contiguous_view: a peer
	// cannot address them, so a remotely reading algorithm gets an import.
	contiguousView bool
}

const viewPrelude = `mesh 2
input %u : f32[4, 3, 6] symmetric
input %g : f32[4, 3, 6]
input %z : f32[4/DIDx, 3, 6] symmetric
input %w : f32[2/DIDx, 12] symmetric
input %q : f32[2/DIDx, 64] symmetric
`

var inputViews = []viewOperand{
	{name: "select_axis0_of_symmetric", defs: "%V = select %u, 1", shape: []int64{3, 6}, shard: -1},
	{name: "select_axis1_of_symmetric", defs: "%V = select %u, 1 axis=1", shape: []int64{4, 6}, shard: -1},
	{name: "reshape_of_symmetric", defs: "%V = reshape %u shape=[12, 6]", shape: []int64{12, 6}, shard: -1},
	{name: "select_axis1_of_global", defs: "%V = select %g, 2 axis=1", shape: []int64{4, 6}, shard: -1},
	{name: "contiguous_view_padded", defs: "%V = symmetric_contiguous_view %w", shape: []int64{2, 12}, shard: -1, contiguousView: true},
	{name: "contiguous_view_dense", defs: "%V = symmetric_contiguous_view %q", shape: []int64{2, 64}, shard: -1, contiguousView: true},
	{name: "select_of_contiguous_view", defs: "%cv = symmetric_contiguous_view %w\n%V = select %cv, 1", shape: []int64{12}, shard: -1, contiguousView: true},
	{name: "sharded_select_axis1", defs: "%V = select %z, 1 axis=1", shape: []int64{4, 6}, shard: 0},
	{name: "sharded_select_axis2", defs: "%V = select %z, 3 axis=2", shape: []int64{4, 3}, shard: 0},
}

func typeString(shape []int64, shard int, mem string) string {
	var b strings.Builder
	b.WriteString("f32[")
	for i, e := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, e)
		if i == shard {
			b.WriteString("/DIDx")
		}
	}
	b.WriteString("]")
	if mem != "" {
		b.WriteString(" " + mem)
	}
	return b.String()
}

// evenAxis is the first axis other than skip whose extent the mesh of 2
// divides, or -1.
func evenAxis(shape []int64, skip int) int {
	for i, e := range shape {
		if i != skip && e%2 == 0 {
			return i
		}
	}
	return -1
}

// collectiveUse is one collective applied to %X, its result type and text.
type collectiveUse struct {
	op, attrs string
	resShape  []int64
	resShard  int
}

func collectiveUses(v viewOperand) []collectiveUse {
	var uses []collectiveUse
	add := func(op, attrs string, shape []int64, shard int) {
		uses = append(uses, collectiveUse{op: op, attrs: attrs, resShape: shape, resShard: shard})
	}
	if v.shard < 0 {
		add("all_reduce", "", v.shape, -1)
		add("broadcast", "root=1", v.shape, -1)
		add("reduce", "root=1", v.shape, -1)
		if a := evenAxis(v.shape, -1); a >= 0 {
			add("reduce_scatter", fmt.Sprintf("axis=%d", a), v.shape, a)
			add("scatter", fmt.Sprintf("root=1 axis=%d", a), v.shape, a)
		}
		return uses
	}
	add("all_gather", "", v.shape, -1)
	add("gather", "root=1", v.shape, -1)
	if a := evenAxis(v.shape, v.shard); a >= 0 {
		add("all_to_all", fmt.Sprintf("axis=%d", a), v.shape, a)
	}
	return uses
}

type commCase struct {
	name      string
	prog, ref string
	// reject, when set, is a text the checker's message must hold; the
	// program must not run.
	reject string
}

func viewCommCases() []commCase {
	var cases []commCase
	for _, v := range inputViews {
		for _, u := range collectiveUses(v) {
			opc, _ := ir.LookupOpcode(u.op, 1)
			for _, algo := range ir.Algorithms(opc) {
				res := typeString(u.resShape, u.resShard, "symmetric")
				line := func(x string) string {
					return fmt.Sprintf("%%r = %s %s algo=%s %s : %s\n", u.op, x, algo, u.attrs, res)
				}
				cases = append(cases, commCase{
					name: fmt.Sprintf("%s/%s/%s", v.name, u.op, algo),
					prog: viewPrelude + v.defs + "\n" + line("%V") + "output %r\n",
					ref:  viewPrelude + v.defs + "\n%c = copy %V\n" + line("%c") + "output %r\n",
				})
			}
		}
		// send a view; receive it on the peer (sends on a stream of their
		// own, so the ring shift cannot deadlock).
		t := typeString(v.shape, v.shard, "")
		send := func(x string) string {
			return fmt.Sprintf("%%s = stream\nset_stream %%s\nsend %s peer=+1\nset_stream\n%%r = recv peer=-1 : %s\nsync_stream %%s\noutput %%r\n", x, t)
		}
		cases = append(cases, commCase{
			name: v.name + "/send",
			prog: viewPrelude + v.defs + "\n" + send("%V"),
			ref:  viewPrelude + v.defs + "\n%c = copy %V\n" + send("%c"),
		})
	}
	cases = append(cases, outputBufferCases()...)
	cases = append(cases, transferCases()...)
	return cases
}

// outputView is a view of a fresh allocation %o, used as an output buffer.
type outputView struct {
	name, defs string
	shape      []int64
	shard      int
	reject     string
}

var outputViews = []outputView{
	{name: "out_select_axis1", defs: "%o = alloc : f32[4, 3, 6] symmetric\n%O = select %o, 1 axis=1", shape: []int64{4, 6}, shard: -1},
	{name: "out_select_axis0", defs: "%o = alloc : f32[4, 3, 6] symmetric\n%O = select %o, 2", shape: []int64{3, 6}, shard: -1},
	{name: "out_reshape", defs: "%o = alloc : f32[4, 3, 6] symmetric\n%O = reshape %o shape=[12, 6]", shape: []int64{12, 6}, shard: -1},
	{name: "out_sharded_select", defs: "%o = alloc : f32[4/DIDx, 3, 6] symmetric\n%O = select %o, 1 axis=1", shape: []int64{4, 6}, shard: 0},
	{name: "out_contiguous_view", defs: "%o = alloc : f32[2/DIDx, 12] symmetric\n%O = symmetric_contiguous_view %o", shape: []int64{2, 12}, shard: -1,
		reject: "the output buffer %O is a contiguous view, which maps every rank's shard"},
}

func outputBufferCases() []commCase {
	var cases []commCase
	for _, o := range outputViews {
		// the collectives whose result has the view's type, fed by an
		// input %src of the type they take
		type use struct {
			op, attrs string
			src       string
		}
		var uses []use
		if o.shard < 0 {
			t := typeString(o.shape, -1, "")
			uses = append(uses, use{"all_reduce", "", t}, use{"broadcast", "root=1", t}, use{"reduce", "root=0", t})
			if o.shape[0]%2 == 0 {
				uses = append(uses, use{"all_gather", "", typeString(o.shape, 0, "")}, use{"gather", "root=1", typeString(o.shape, 0, "")})
			}
		} else {
			uses = append(uses, use{"reduce_scatter", "axis=0", typeString(o.shape, -1, "")}, use{"scatter", "root=1 axis=0", typeString(o.shape, -1, "")})
		}
		for _, u := range uses {
			opc, _ := ir.LookupOpcode(u.op, 1)
			for _, algo := range ir.Algorithms(opc) {
				pre := viewPrelude + "input %src : " + u.src + "\n" + o.defs + "\n"
				c := commCase{
					name:   fmt.Sprintf("%s/%s/%s", o.name, u.op, algo),
					prog:   pre + fmt.Sprintf("%%r = %s %%src, %%O algo=%s %s\noutput %%o\n", u.op, algo, u.attrs),
					reject: o.reject,
				}
				if o.reject == "" {
					res := typeString(o.shape, o.shard, "symmetric")
					c.ref = pre + fmt.Sprintf("%%r0 = %s %%src algo=%s %s : %s\n%%c = copy %%O\n%%r = copy %%r0, %%O\noutput %%o\n", u.op, algo, u.attrs, res)
					if u.op == "reduce" || u.op == "gather" {
						// off the root the op leaves the buffer alone
						c.ref = pre + fmt.Sprintf("%%r0 = %s %%src algo=%s %s : %s\n%%r = copy %%r0, %%O\noutput %%o\n", u.op, algo, u.attrs, res)
					}
				}
				cases = append(cases, c)
			}
		}
		// receive into the view
		if o.reject == "" {
			t := typeString(o.shape, o.shard, "")
			pre := viewPrelude + "input %src : " + t + "\n" + o.defs + "\n%s = stream\nset_stream %s\nsend %src peer=+1\nset_stream\n"
			cases = append(cases, commCase{
				name: o.name + "/recv",
				prog: pre + "%r = recv %O peer=-1\nsync_stream %s\noutput %o\n",
				ref:  pre + fmt.Sprintf("%%r0 = recv peer=-1 : %s\n%%r = copy %%r0, %%O\nsync_stream %%s\noutput %%o\n", t),
			})
		}
	}
	return cases
}

func transferCases() []commCase {
	const pre = "mesh 2\ninput %u : f32[4, 3, 6] symmetric\ninput %u2 : f32[2, 72] symmetric\ninput %gg : f32[72, 2]\n"
	return []commCase{{
		name: "transfer_read_into_strided_view",
		prog: pre + "%big = alloc : f32[72, 2]\n%L = select %big, 1 axis=1\n%h = register %u\n%t = transfer %h, %L dir=read peer=+1\nwait %t\nderegister %h\noutput %big\n",
		ref:  pre + "%big = alloc : f32[72, 2]\n%L = select %big, 1 axis=1\n%h = register %u\n%l = alloc : f32[72]\n%t = transfer %h, %l dir=read peer=+1\nwait %t\nderegister %h\n%c = copy %l, %L\noutput %big\n",
	}, {
		name: "transfer_write_from_strided_view",
		prog: pre + "%L = select %gg, 1 axis=1\n%h = register %u\n%t = transfer %h, %L dir=write peer=+1\nwait %t\nderegister %h\n%out = copy %u\noutput %out\n",
		ref:  pre + "%L = select %gg, 1 axis=1\n%l = copy %L\n%h = register %u\n%t = transfer %h, %l dir=write peer=+1\nwait %t\nderegister %h\n%out = copy %u\noutput %out\n",
	}, {
		name: "register_a_select_of_symmetric",
		prog: pre + "%R = select %u2, 1\n%h = register %R\n%l = alloc : f32[72]\n%t = transfer %h, %l dir=read peer=+1\nwait %t\nderegister %h\noutput %l\n",
		ref:  pre + "%h = register %u2\n%l2 = alloc : f32[2, 72]\n%t = transfer %h, %l2 dir=read peer=+1\nwait %t\nderegister %h\n%x = select %l2, 1\n%l = copy %x\noutput %l\n",
	}, {
		name:   "register_a_contiguous_view",
		prog:   "mesh 2\ninput %w : f32[2/DIDx, 12] symmetric\n%cv = symmetric_contiguous_view %w\n%h = register %cv\nderegister %h\noutput %w\n",
		reject: "register: %cv is a contiguous view of every rank's shard",
	}}
}

// runText parses, lowers and runs src on the CPU runtime with fixed
// inputs; err is a check error when checked is false.
func runText(t *testing.T, name, src string) (res *evaluator.Result, checked bool, err error) {
	t.Helper()
	prog, err := parser.Parse(name+".hir", []byte(src))
	require.NoError(t, err, "parse:\n%s", src)
	if err := passes.Lower(prog, &passes.Context{}); err != nil {
		return nil, false, err
	}
	rt, err := runtime.Open("sim", runtime.Config{WorldSize: prog.Mesh.Size(), Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rt.Close()
	j, err := evaluator.NewJob(prog, rt, evaluator.Options{})
	require.NoError(t, err)
	defer j.Close()
	inputs := map[string]*host.Array{}
	for i, in := range prog.Inputs {
		tt := in.Tensor()
		inputs[in.Name] = host.Random(tt.DType, tt.Shape(), uint64(100+i))
	}
	res, err = j.Run(inputs)
	return res, true, err
}

func TestViewsAsCommunicationOperands(t *testing.T) {
	cases := viewCommCases()
	require.Greater(t, len(cases), 100)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, checked, err := runText(t, "prog", c.prog)
			if c.reject != "" {
				require.False(t, checked, "the checker must reject:\n%s", c.prog)
				require.ErrorContains(t, err, c.reject)
				return
			}
			require.True(t, checked, "the checker rejected it: %v\n%s", err, c.prog)
			require.NoError(t, err, "a checked program failed at run time:\n%s", c.prog)
			want, _, err := runText(t, "ref", c.ref)
			require.NoError(t, err, "reference:\n%s", c.ref)
			for i, rr := range got.Ranks {
				require.Len(t, rr.Outputs, len(want.Ranks[i].Outputs))
				for name, a := range want.Ranks[i].Outputs {
					require.NoError(t, host.Equal(a, rr.Outputs[name]), "rank %d output %%%s\n%s", rr.Rank, name, c.prog)
				}
			}
		})
	}
}

// TestContiguousViewReadRemotelyIsImported: a collective that reads its
// input remotely gets a symmetric copy of a contiguous view, and -explain
// says why.
func TestContiguousViewReadRemotelyIsImported(t *testing.T) {
	prog, err := parser.Parse("p.hir", []byte(viewPrelude+"%V = symmetric_contiguous_view %w\n%r = all_reduce %V algo=one_shot\noutput %r\n"))
	require.NoError(t, err)
	var explain strings.Builder
	require.NoError(t, passes.Lower(prog, &passes.Context{Explain: &explain}))
	require.Contains(t, explain.String(), "reads %V remotely (it is symmetric, but as a view of the contiguous view %V it is this rank's mapping of every shard, which peers cannot address); imported it onto the symmetric heap as %V.sym")
}

var updateContract = flag.Bool("update-contract", false, "rewrite ../testdata/contract/views_*.hir from the view cases")

// TestContractViewPrograms keeps ../testdata/contract/views_*.hir, the view
// cases the checker accepts, gathered into a few programs with `// args:`
// lines, as generated here: they are goldens of the CLI (cmd/hirrun
// TestGolden) and run on GPUs against the CPU runtime's outputs
// (scripts/device-run.sh). -update-contract rewrites them.
func TestContractViewPrograms(t *testing.T) {
	want := contractViewPrograms()
	for name, src := range want {
		// in fmt's canonical form, as every program of the repository
		formatted, err := format.Source(name+".hir", []byte(src))
		require.NoError(t, err, name)
		src = string(formatted)
		file := filepath.Join("..", "testdata", "contract", name+".hir")
		if *updateContract {
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
			continue
		}
		got, err := os.ReadFile(file)
		require.NoError(t, err, "run `go test ./evaluator -run TestContractViewPrograms -update-contract`")
		require.Equal(t, src, string(got), "%s is stale: run `go test ./evaluator -run TestContractViewPrograms -update-contract`", file)
	}
}

// contractViewPrograms gathers the accepted cases of viewCommCases into one
// program per view: the body of each case, its names suffixed with the
// case's number so they do not clash, every result an output.
func contractViewPrograms() map[string]string {
	groups := map[string][]commCase{}
	var order []string
	for _, c := range viewCommCases() {
		if c.reject != "" {
			continue
		}
		// NCCL refuses ranks that share a GPU: its cases go apart, so the
		// rest runs on one GPU too
		g := "views_" + strings.SplitN(c.name, "/", 2)[0]
		if strings.HasSuffix(c.name, "/nccl") {
			g += "_nccl"
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], c)
	}
	nameRE := regexp.MustCompile(`%[A-Za-z_][A-Za-z0-9_.]*`)
	out := map[string]string{}
	for _, g := range order {
		inputs := map[string]string{} // name -> type
		local := map[string]bool{}    // inputs of one case, renamed
		var inputOrder []string
		var body, outputs []string
		for k, c := range groups[g] {
			for _, line := range strings.Split(strings.TrimSpace(c.prog), "\n") {
				switch {
				case strings.HasPrefix(line, "mesh "):
				case strings.HasPrefix(line, "input "):
					name, typ, _ := strings.Cut(strings.TrimPrefix(line, "input "), " : ")
					if name == "%src" { // the one input whose type varies by case
						name = fmt.Sprintf("%s_%d", name, k)
						local[name] = true
					}
					if _, ok := inputs[name]; !ok {
						inputOrder = append(inputOrder, name)
					}
					if prev, ok := inputs[name]; ok && prev != typ {
						panic("input " + name + " has two types")
					}
					inputs[name] = typ
				case strings.HasPrefix(line, "output "):
					for _, o := range strings.Split(strings.TrimPrefix(line, "output "), ", ") {
						outputs = append(outputs, fmt.Sprintf("%s_%d", o, k))
					}
				default:
					body = append(body, nameRE.ReplaceAllStringFunc(line, func(n string) string {
						if _, isInput := inputs[n]; isInput && !local[n] {
							return n
						}
						return fmt.Sprintf("%s_%d", n, k)
					}))
				}
			}
		}
		var b strings.Builder
		b.WriteString("// args:")
		for i, n := range inputOrder {
			fmt.Fprintf(&b, " --input %s=random:seed=%d", n[1:], 100+i)
		}
		fmt.Fprintf(&b, "\n// Generated by evaluator/views_comm_test.go (TestContractViewPrograms): views\n// as operands of communication, %d cases the checker accepts. Each\n// equals its reference (the view copied first) on the CPU runtime.\nmesh 2\n", len(groups[g]))
		for _, n := range inputOrder {
			fmt.Fprintf(&b, "input %s : %s\n", n, inputs[n])
		}
		b.WriteString(strings.Join(body, "\n") + "\n")
		b.WriteString("output " + strings.Join(outputs, ", ") + "\n")
		out[g] = b.String()
	}
	return out
}
