package core

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
)

// minTokenSeconds is the shortest token a TokenRequest may ask for.
const minTokenSeconds = 10 * 60

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// tokenREST is serviceaccounts/token (TokenRequest): a token for the
// service account, bound to a pod, secret or node if asked, as
// kube-apiserver issues them.
type tokenREST struct {
	serviceAccounts, pods, secrets, nodes rest.Getter
	issuer                                providers.TokenIssuer
}

var (
	_ rest.NamedCreater             = (*tokenREST)(nil)
	_ rest.GroupVersionKindProvider = (*tokenREST)(nil)
)

func (*tokenREST) New() runtime.Object     { return &authenticationv1.TokenRequest{} }
func (*tokenREST) Destroy()                {}
func (*tokenREST) NamespaceScoped() bool   { return true }
func (*tokenREST) GetSingularName() string { return "token" }

// PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate implements
// rest.SubresourceObjectMetaPreserver, as kube-apiserver's TokenRequest:
// the request's name, namespace and UID are checked against the account's.
func (*tokenREST) PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate() bool { return true }

// GroupVersionKind implements rest.GroupVersionKindProvider.
func (*tokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return tokenRequestKind
}

// Create implements rest.NamedCreater.
func (r *tokenREST) Create(ctx context.Context, name string, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", obj))
	}
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	if err := matchNames(req, name, namespace); err != nil {
		return nil, err
	}
	got, err := r.serviceAccounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := got.(*corev1.ServiceAccount)
	if req.UID != "" && req.UID != sa.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: tokenRequestKind.Group, Resource: tokenRequestKind.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	r.complete(req, sa)
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind.GroupKind(), "", errs)
	}
	if validate != nil {
		if err := validate(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	token := providers.ServiceAccountToken{ServiceAccount: sa, Audiences: req.Spec.Audiences,
		TTL: time.Duration(*req.Spec.ExpirationSeconds) * time.Second}
	if err := r.bind(ctx, req.Spec.BoundObjectRef, name, &token); err != nil {
		return nil, err
	}
	signed, err := r.issuer.IssueToken(ctx, token)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %v", err))
	}
	out := req.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{Token: signed,
		ExpirationTimestamp: metav1.NewTime(out.CreationTimestamp.Add(token.TTL))}
	return out, nil
}

func matchNames(req *authenticationv1.TokenRequest, name, namespace string) error {
	if req.Name != "" && req.Name != name {
		return apierrors.NewInvalid(tokenRequestKind.GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return apierrors.NewInvalid(tokenRequestKind.GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	return nil
}

// defaultTokenRequests defaults a TokenRequest's expirationSeconds to an
// hour when it is decoded, as kube-apiserver's scheme does
// (SetDefaults_TokenRequestSpec): before the field manager runs, so the
// answer's managedFields own spec.expirationSeconds as kube-apiserver's do.
func defaultTokenRequests(scheme *runtime.Scheme) {
	scheme.AddTypeDefaultingFunc(&authenticationv1.TokenRequest{}, func(obj any) {
		if spec := &obj.(*authenticationv1.TokenRequest).Spec; spec.ExpirationSeconds == nil {
			spec.ExpirationSeconds = new(int64(60 * 60))
		}
	})
}

// complete fills in what the request left out, as kube-apiserver does.
func (r *tokenREST) complete(req *authenticationv1.TokenRequest, sa *corev1.ServiceAccount) {
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = r.issuer.Audiences()
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = new(int64(3600))
	}
	if req.Name == "" {
		req.Name = sa.Name
	}
	if req.Namespace == "" {
		req.Namespace = sa.Namespace
	}
	if req.UID == "" {
		req.UID = sa.UID
	}
	req.CreationTimestamp = metav1.Now()
	req.Status = authenticationv1.TokenRequestStatus{}
}

func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	if s := *req.Spec.ExpirationSeconds; s < minTokenSeconds {
		errs = append(errs, field.Invalid(p, s, "may not specify a duration less than 10 minutes"))
	} else if s > 1<<32 {
		errs = append(errs, field.Invalid(p, s, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

// bind looks up the object the token is bound to, which must exist (and
// have the UID given, if one is).
func (r *tokenREST) bind(ctx context.Context, ref *authenticationv1.BoundObjectReference, sa string, t *providers.ServiceAccountToken) error {
	if ref == nil {
		return nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, err := get[*corev1.Pod](ctx, r.pods, "pods", ns, ref.Name)
		if err != nil {
			return err
		}
		if pod.Spec.ServiceAccountName != sa {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa))
		}
		t.Pod, uid = pod, pod.UID
		if pod.Spec.NodeName != "" {
			t.Node, err = get[*corev1.Node](ctx, r.nodes, "nodes", "", pod.Spec.NodeName)
			if apierrors.IsNotFound(err) {
				t.Node, err = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName}}, nil
			}
			if err != nil {
				return apierrors.NewInternalError(err)
			}
		}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, err := get[*corev1.Node](ctx, r.nodes, "nodes", "", ref.Name)
		if err != nil {
			return err
		}
		t.Node, uid = node, node.UID
	case gvk.Group == "" && gvk.Kind == "Secret":
		secret, err := get[*corev1.Secret](ctx, r.secrets, "secrets", ns, ref.Name)
		if err != nil {
			return err
		}
		t.Secret, uid = secret, secret.UID
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && uid != ref.UID {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// get reads name with g, as a GET of resource would (a missing object is
// "pods \"x\" not found", not the service account's resource).
func get[T runtime.Object](ctx context.Context, g rest.Getter, resource, namespace, name string) (T, error) {
	if info, ok := genericapirequest.RequestInfoFrom(ctx); ok {
		lookup := *info
		lookup.Verb, lookup.APIGroup, lookup.APIVersion, lookup.Resource, lookup.Subresource = "get", "", "v1", resource, ""
		lookup.Namespace, lookup.Name = namespace, name
		ctx = genericapirequest.WithNamespace(genericapirequest.WithRequestInfo(ctx, &lookup), namespace)
	}
	obj, err := g.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		var zero T
		return zero, err
	}
	return obj.(T), nil
}
