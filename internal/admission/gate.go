package admission

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// WhenAny builds a plugin with build the first time any() reports there is
// something for it to apply (an admission policy), and runs it from then
// on. Admission policy plugins start controllers when initialized and make
// every request wait, polling every 100 ms, until those have compiled the
// policies: with no policy defined, which is most servers, that bought
// nothing and cost 100 ms at start-up, plus controllers that could not
// sync when a server lived for milliseconds. As on kube-apiserver, a policy
// applies shortly after it is created, not at once.
func WhenAny(build func() (admission.Interface, error), any func() bool) admission.Interface {
	return &gated{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete, admission.Connect), build: build, any: any}
}

type gated struct {
	*admission.Handler
	build func() (admission.Interface, error)
	any   func() bool

	once   sync.Once
	plugin admission.Interface
	err    error
}

var (
	_ admission.MutationInterface   = (*gated)(nil)
	_ admission.ValidationInterface = (*gated)(nil)
)

func (g *gated) get() (admission.Interface, error) {
	if !g.any() {
		return nil, nil
	}
	g.once.Do(func() { g.plugin, g.err = g.build() })
	if g.err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("admission policy plugin: %w", g.err))
	}
	return g.plugin, nil
}

// Admit implements admission.MutationInterface.
func (g *gated) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	p, err := g.get()
	if p == nil || err != nil {
		return err
	}
	if m, ok := p.(admission.MutationInterface); ok && m.Handles(a.GetOperation()) {
		return m.Admit(ctx, a, o)
	}
	return nil
}

// Validate implements admission.ValidationInterface.
func (g *gated) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	p, err := g.get()
	if p == nil || err != nil {
		return err
	}
	if v, ok := p.(admission.ValidationInterface); ok && v.Handles(a.GetOperation()) {
		return v.Validate(ctx, a, o)
	}
	return nil
}
