package controlplane

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeembed/apiserver/controllers"
)

// stopCounter is a controller that counts its ShutDowns; its Run shuts it
// down as the controllers' do.
type stopCounter struct{ shutDowns int }

func (s *stopCounter) Run(context.Context)                        { s.ShutDown() }
func (s *stopCounter) Idle(map[schema.GroupResource]uint64) error { return nil }
func (s *stopCounter) Finished() uint64                           { return 0 }
func (s *stopCounter) ShutDown()                                  { s.shutDowns++ }

// The controllers whose start hooks never ran (the server stopped first)
// are shut down when the set stops, so that the goroutines client-go
// starts for their queues as it makes them end; those that ran shut down
// in their Run, and are not shut down again.
func TestControllerSetShutsDownTheControllersThatNeverRan(t *testing.T) {
	t.Parallel()
	ran, never := &stopCounter{}, &stopCounter{}
	set := &controllerSet{started: map[controllers.Name]bool{},
		running: []namedController{{controllers.Job, ran}, {controllers.CronJob, never}}}
	set.started[controllers.Job] = true
	set.wg.Go(func() { ran.Run(t.Context()) })
	set.wait()
	assert.Equal(t, 1, ran.shutDowns, "the controller that ran")
	assert.Equal(t, 1, never.shutDowns, "the controller that never ran")
	assert.True(t, set.stopped, "no controller starts after")
}
