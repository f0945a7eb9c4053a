// Package authentication serves authentication.k8s.io/v1 TokenReview and
// SelfSubjectReview, answered by the server's own authenticator.
package authentication

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves authentication.k8s.io.
func Provider() providers.Provider { return group }

// group's resources are never stored: TokenReview asks the server's
// authenticator, SelfSubjectReview answers who is asking.
var group = registry.Group{
	GroupVersion: authenticationv1.SchemeGroupVersion, AddToScheme: authenticationv1.AddToScheme,
	Served: []registry.Served{
		registry.Computed{Resource: "tokenreviews", Build: func(cfg providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authenticationv1.TokenReview{} },
				Singular: "tokenreview", CreateFunc: tokenReview(cfg.Authenticator, apiAudiences(cfg))}
		}},
		registry.Computed{Resource: "selfsubjectreviews", Build: func(providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
				Singular: "selfsubjectreview", CreateFunc: selfSubjectReview}
		}},
	},
}

// apiAudiences are the server's API audiences: those of its requests, and
// of a TokenReview that names none, as kube-apiserver's.
func apiAudiences(cfg providers.Config) authenticator.Audiences {
	if cfg.ServiceAccountTokens == nil {
		return nil
	}
	return cfg.ServiceAccountTokens.Audiences()
}

func tokenReview(authn authenticator.Request, apiAudiences authenticator.Audiences) func(context.Context, runtime.Object, func() error) (runtime.Object, error) {
	return func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
		tr, ok := obj.(*authenticationv1.TokenReview)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenReview: %#v", obj))
		}
		if ns := genericapirequest.NamespaceValue(ctx); ns != "" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is not allowed on this type: %v", ns))
		}
		if tr.Spec.Token == "" {
			return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
		}
		if err := validate(); err != nil {
			return nil, err
		}
		if authn == nil {
			return tr, nil
		}
		// Authenticate a request that carries nothing but the token.
		req := &http.Request{Header: http.Header{"Authorization": {"Bearer " + tr.Spec.Token}}}
		auds := authenticator.Audiences(tr.Spec.Audiences)
		if len(auds) == 0 {
			auds = apiAudiences
		}
		if len(auds) > 0 {
			req = req.WithContext(authenticator.WithAudiences(context.Background(), auds))
		}
		resp, ok, err := authn.AuthenticateRequest(req)
		tr.Status.Authenticated = ok
		if err != nil {
			tr.Status.Error = err.Error()
		}
		if len(auds) > 0 && resp != nil && len(auds.Intersect(resp.Audiences)) == 0 {
			// kube-apiserver's answer to an authenticator that ignored them.
			return nil, apierrors.NewInternalError(errors.New("error validating audiences"))
		}
		if ok && resp != nil && resp.User != nil {
			tr.Status.User = authenticationv1.UserInfo{Username: resp.User.GetName(), UID: resp.User.GetUID(),
				Groups: resp.User.GetGroups(), Extra: map[string]authenticationv1.ExtraValue{}}
			for k, v := range resp.User.GetExtra() {
				tr.Status.User.Extra[k] = v
			}
			tr.Status.Audiences = resp.Audiences
		}
		return tr, nil
	}
}

func selfSubjectReview(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
	if err := validate(); err != nil {
		return nil, err
	}
	if _, ok := obj.(*authenticationv1.SelfSubjectReview); !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %#v", obj))
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	out := &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(),
			Extra: make(map[string]authenticationv1.ExtraValue, len(u.GetExtra())),
		}},
	}
	for k, v := range u.GetExtra() {
		out.Status.UserInfo.Extra[k] = v
	}
	return out, nil
}
