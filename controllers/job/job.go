// Package job is kube-controller-manager's job controller (being written).
package job

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the job controller.
type Controller struct {
	controller.Parts
}

// New returns the job controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = "job", controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
