// Package cronjob is kube-controller-manager's cronjob controller (being written).
package cronjob

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the cronjob controller.
type Controller struct {
	controller.Parts
}

// New returns the cronjob controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = "cronjob", controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
