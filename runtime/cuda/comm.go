package cuda

import "github.com/hirlab/hir/runtime"

// Collectives run as symmetric-memory kernels (collective.go; the kernels
// in kernels/*.cu, assembled by collective_kernels.go; the signal pads in
// signal.go) or through NCCL (coll_nccl.go); send and recv through
// per-pair inboxes (p2p.go).

// Collective runs c on stream s; see docs/COLLECTIVES.md.
func (d *Device) Collective(c *runtime.CollectiveCall, s runtime.Stream) error {
	return d.Comm.Collective(c, s)
}

// Send sends t to peer, ordered on s: matched with peer's k-th Recv from
// this rank.
func (d *Device) Send(t runtime.Tensor, peer int, s runtime.Stream) error {
	return d.P2pTransfer(t, peer, s, true)
}

// Recv receives into t the next tensor peer sent to this rank.
func (d *Device) Recv(t runtime.Tensor, peer int, s runtime.Stream) error {
	return d.P2pTransfer(t, peer, s, false)
}
