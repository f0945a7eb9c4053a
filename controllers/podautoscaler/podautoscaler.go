// Package horizontalpodautoscaling is kube-controller-manager's horizontalpodautoscaling controller (being written).
package podautoscaler

import (
	"context"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the horizontalpodautoscaling controller.
type Controller struct {
	controller.Parts
}

// New returns the horizontalpodautoscaling controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{}
	c.Name, c.Observer = "horizontalpodautoscaling", controller.NewObserver(cfg.Revisions)
	return c, nil
}

// Run runs until ctx ends.
func (c *Controller) Run(ctx context.Context) { <-ctx.Done() }
