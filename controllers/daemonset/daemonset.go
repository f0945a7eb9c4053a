// Package daemonset is kube-controller-manager's daemonset controller (being written).
package daemonset

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the daemonset controller.
type Controller struct {
	controller.Parts
}

// New returns the daemonset controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = "daemonset", controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
