// Package ttlafterfinished is kube-controller-manager's ttlafterfinished controller (being written).
package ttlafterfinished

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the ttlafterfinished controller.
type Controller struct {
	controller.Parts
}

// New returns the ttlafterfinished controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = "ttlafterfinished", controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
