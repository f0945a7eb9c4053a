package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// CreateOnly is a resource that is never stored: a POST computes an answer
// (the review APIs: TokenReview, SubjectAccessReview...).
type CreateOnly struct {
	NewFunc    func() runtime.Object
	Namespaced bool
	Singular   string
	// CreateFunc answers a POST. validate runs admission's validation; call
	// it where kube-apiserver does for the kind.
	CreateFunc func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error)
}

var (
	_ rest.Creater              = (*CreateOnly)(nil)
	_ rest.Scoper               = (*CreateOnly)(nil)
	_ rest.SingularNameProvider = (*CreateOnly)(nil)
)

// New implements rest.Storage.
func (c *CreateOnly) New() runtime.Object { return c.NewFunc() }

// Destroy implements rest.Storage: nothing is stored.
func (c *CreateOnly) Destroy() {}

// NamespaceScoped implements rest.Scoper.
func (c *CreateOnly) NamespaceScoped() bool { return c.Namespaced }

// GetSingularName implements rest.SingularNameProvider.
func (c *CreateOnly) GetSingularName() string { return c.Singular }

// Create implements rest.Creater.
func (c *CreateOnly) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	return c.CreateFunc(ctx, obj, func() error {
		if createValidation == nil {
			return nil
		}
		return createValidation(ctx, obj.DeepCopyObject())
	})
}
