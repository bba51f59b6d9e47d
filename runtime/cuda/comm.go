package cuda

import "github.com/hirlab/hir/runtime"

// Collectives and point-to-point transfers come with the collectives issue.

func (d *Device) Collective(c *runtime.CollectiveCall, s runtime.Stream) error {
	name := "collective"
	if c != nil {
		name = c.Op.String()
	}
	return unsupported("collectives (" + name + ")")
}

func (d *Device) Send(t runtime.Tensor, peer int, s runtime.Stream) error {
	return unsupported("send")
}

func (d *Device) Recv(t runtime.Tensor, peer int, s runtime.Stream) error {
	return unsupported("recv")
}
