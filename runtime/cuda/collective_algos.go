package cuda

import "github.com/hirlab/hir/runtime/cuda/internal/gpu"
import "github.com/hirlab/hir/ir"

// collRun runs a planned collective of more than one rank on stream s.
type collRun func(d *Device, cs *commState, ch *commChannel, p *collPlan, s *gpu.Stream) error

type collKey struct {
	op   ir.Opcode
	algo ir.Algo
}

// collAlgorithms is what this runtime runs for each (collective, algorithm)
// of ir's table but auto, which resolves to one of them first
// (resolveAlgo): the one place a new algorithm enters, as the CPU runtime's
// algorithms table is (TestCUDARunsEveryRule holds them equal to ir's).
var collAlgorithms = map[collKey]collRun{
	{ir.OpAllGather, ir.AlgoOneShot}:    (*Device).runSymmetric,
	{ir.OpAllGather, ir.AlgoRing}:       (*Device).runAllGatherRing,
	{ir.OpAllGather, ir.AlgoCopyEngine}: (*Device).runCopyEngine,
	{ir.OpAllGather, ir.AlgoNCCL}:       runNCCL,
	{ir.OpAllGather, ir.AlgoLL}:         (*Device).runLL,

	{ir.OpReduceScatter, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpReduceScatter, ir.AlgoRing}:    (*Device).runRing,
	{ir.OpReduceScatter, ir.AlgoNCCL}:    runNCCL,
	{ir.OpReduceScatter, ir.AlgoLL}:      (*Device).runLL,

	{ir.OpAllReduce, ir.AlgoOneShot}: runAllReduceOneShot,
	{ir.OpAllReduce, ir.AlgoTwoShot}: (*Device).runSymmetric,
	{ir.OpAllReduce, ir.AlgoRing}:    (*Device).runRing,
	{ir.OpAllReduce, ir.AlgoNCCL}:    runNCCL,
	{ir.OpAllReduce, ir.AlgoLL}:      (*Device).runLL,

	{ir.OpAllToAll, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpAllToAll, ir.AlgoNCCL}:    runNCCL,
	{ir.OpAllToAll, ir.AlgoLL}:      (*Device).runLL,

	{ir.OpBroadcast, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpBroadcast, ir.AlgoNCCL}:    runNCCL,
	{ir.OpBroadcast, ir.AlgoLL}:      (*Device).runLL,

	{ir.OpReduce, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpReduce, ir.AlgoNCCL}:    runNCCL,

	{ir.OpGather, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpGather, ir.AlgoNCCL}:    runNCCL,

	{ir.OpScatter, ir.AlgoOneShot}: (*Device).runSymmetric,
	{ir.OpScatter, ir.AlgoNCCL}:    runNCCL,
}

func runNCCL(d *Device, _ *commState, _ *commChannel, p *collPlan, s *gpu.Stream) error {
	return d.runNCCL(p, s)
}

// runAllReduceOneShot: small tensors through the LL kernel (collPlan.ll:
// the same launch as algo=ll), else the reduce kernel between barriers.
func runAllReduceOneShot(d *Device, cs *commState, ch *commChannel, p *collPlan, s *gpu.Stream) error {
	if p.ll {
		return d.runLL(cs, ch, p, s)
	}
	return d.runSymmetric(cs, ch, p, s)
}
