// Package provisioner is the simulated volume provisioner of the default StorageClass.
//
// Not written yet: this is the seam the server wires (a controller that
// does nothing until its package is written).
package provisioner

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the controller.
type Controller struct{ controller.Parts }

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = string(controllers.VolumeProvisioner), controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
