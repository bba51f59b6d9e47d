package coll

import "github.com/hirlab/hir/runtime/cuda/internal/gpu"
import "github.com/hirlab/hir/ir"

// collRun runs a planned collective of more than one rank on stream s.
type collRun func(d *Comm, cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error

type CollKey struct {
	Op   ir.Opcode
	Algo ir.Algo
}

// collAlgorithms is what this runtime runs for each (collective, algorithm)
// of ir's table but auto, which resolves to one of them first
// (resolveAlgo): the one place a new algorithm enters, as the CPU runtime's
// algorithms table is (TestCUDARunsEveryRule holds them equal to ir's).
var CollAlgorithms = map[CollKey]collRun{
	{ir.OpAllGather, ir.AlgoOneShot}:    (*Comm).runSymmetric,
	{ir.OpAllGather, ir.AlgoRing}:       (*Comm).runAllGatherRing,
	{ir.OpAllGather, ir.AlgoCopyEngine}: (*Comm).runCopyEngine,
	{ir.OpAllGather, ir.AlgoNCCL}:       runNCCL,
	{ir.OpAllGather, ir.AlgoLL}:         (*Comm).runLL,

	{ir.OpReduceScatter, ir.AlgoOneShot}:    (*Comm).runSymmetric,
	{ir.OpReduceScatter, ir.AlgoRing}:       (*Comm).runRing,
	{ir.OpReduceScatter, ir.AlgoCopyEngine}: (*Comm).runReduceScatterCE,
	{ir.OpReduceScatter, ir.AlgoNCCL}:       runNCCL,
	{ir.OpReduceScatter, ir.AlgoLL}:         (*Comm).runLL,

	{ir.OpAllReduce, ir.AlgoOneShot}: runAllReduceOneShot,
	{ir.OpAllReduce, ir.AlgoTwoShot}: (*Comm).runSymmetric,
	{ir.OpAllReduce, ir.AlgoRing}:    (*Comm).runRing,
	{ir.OpAllReduce, ir.AlgoNCCL}:    runNCCL,
	{ir.OpAllReduce, ir.AlgoLL}:      (*Comm).runLL,

	{ir.OpAllToAll, ir.AlgoOneShot}: (*Comm).runSymmetric,
	{ir.OpAllToAll, ir.AlgoNCCL}:    runNCCL,
	{ir.OpAllToAll, ir.AlgoLL}:      (*Comm).runLL,

	{ir.OpBroadcast, ir.AlgoOneShot}: (*Comm).runSymmetric,
	{ir.OpBroadcast, ir.AlgoNCCL}:    runNCCL,
	{ir.OpBroadcast, ir.AlgoLL}:      (*Comm).runLL,

	{ir.OpReduce, ir.AlgoOneShot}: (*Comm).runSymmetric,
	{ir.OpReduce, ir.AlgoNCCL}:    runNCCL,

	{ir.OpGather, ir.AlgoOneShot}: (*Comm).runSymmetric,
	{ir.OpGather, ir.AlgoNCCL}:    runNCCL,

	{ir.OpScatter, ir.AlgoOneShot}: (*Comm).runSymmetric,
	{ir.OpScatter, ir.AlgoNCCL}:    runNCCL,
}

func runNCCL(d *Comm, _ *CommState, _ *CommChannel, p *CollPlan, s *gpu.Stream) error {
	return d.runNCCL(p, s)
}

// runAllReduceOneShot: small tensors through the LL kernel (collPlan.ll:
// the same launch as algo=ll), else the reduce kernel between barriers.
func runAllReduceOneShot(d *Comm, cs *CommState, ch *CommChannel, p *CollPlan, s *gpu.Stream) error {
	if p.ll {
		return d.runLL(cs, ch, p, s)
	}
	return d.runSymmetric(cs, ch, p, s)
}
