package rbac

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"

	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/providers"
)

// policyYAML is kube-apiserver v1.37.2's RBAC bootstrap policy, read from
// the running server by parity/cmd/bootstrappolicy: every default
// ClusterRole and ClusterRoleBinding (cluster-admin, admin, edit, view,
// system:basic-user, system:discovery, system:public-info-viewer,
// system:controller:*, ...) and its Roles and RoleBindings in kube-system
// and kube-public.
//
//go:embed policy.yaml
var policyYAML []byte

// Policy returns the bootstrap policy's objects, new on each call.
func Policy() ([]runtime.Object, error) {
	objs, err := decodedPolicy()
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out, nil
}

// decodedPolicy decodes the policy once per process, then only read: the
// YAML took ~12 ms of each server's start.
var decodedPolicy = sync.OnceValues(func() ([]runtime.Object, error) {
	var list struct {
		Items []runtime.RawExtension `json:"items"`
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(policyYAML), 4096).Decode(&list); err != nil {
		return nil, fmt.Errorf("bootstrap policy: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := rbacv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	objs := make([]runtime.Object, 0, len(list.Items))
	for _, item := range list.Items {
		obj, _, err := decoder.Decode(item.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("bootstrap policy: %w", err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
})

// bootstrapRoles is kube-apiserver's rbac/bootstrap-roles hook: it makes
// the bootstrap policy's objects exist, reconciling those already there
// (a restart on kept storage, a user's change) as kube-apiserver does
// (k8s.io/component-helpers' reconciliation: missing rules and subjects of
// objects marked rbac.authorization.kubernetes.io/autoupdate are added
// back). New objects are created through the stores, below the handler
// chain: reconciling the 141 objects through the API (a GET and a POST
// each, in process) was measured once at ~200 ms of Start against ~109 ms
// (BENCHMARKS.md). Readiness waits for it.
func bootstrapRoles(_ providers.Config, storage map[string]rest.Storage) genericapiserver.PostStartHookFunc {
	return func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		objs, err := Policy()
		if err != nil {
			return err
		}
		// Roles wait for their namespaces (another hook makes kube-system
		// and kube-public): a retry takes up what is left.
		return retry.Until(ctx, func(ctx context.Context) error {
			var err error
			objs = slices.DeleteFunc(objs, func(obj runtime.Object) bool {
				e := seed(ctx, storage, client, obj)
				err = cmp.Or(err, e)
				return e == nil
			})
			return err
		})
	}
}

// seed creates obj in its store, or reconciles the object already there.
func seed(ctx context.Context, storage map[string]rest.Storage, c kubernetes.Interface, obj runtime.Object) error {
	resources := map[string]string{"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	creater, ok := storage[resources[kind]].(rest.Creater)
	if !ok {
		return fmt.Errorf("bootstrap policy: no store for %s", kind)
	}
	obj = obj.DeepCopyObject()
	m := obj.(metav1.Object)
	now := metav1.Now()
	fields := m.GetManagedFields() // kube-apiserver's, as it wrote them
	for i := range fields {
		fields[i].Time = &now
	}
	// As the loopback's user, which escalation checks let through.
	ctx = genericapirequest.WithUser(genericapirequest.WithNamespace(ctx, m.GetNamespace()),
		&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}})
	_, err := creater.Create(ctx, obj, nil, &metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return reconcile(c, obj)
}

// reconcile reconciles an existing object with the policy's.
func reconcile(c kubernetes.Interface, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *rbacv1.ClusterRole:
		_, err = (&reconciliation.ReconcileRoleOptions{Confirm: true, Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: o},
			Client: reconciliation.ClusterRoleModifier{Client: c.RbacV1().ClusterRoles()}}).Run()
	case *rbacv1.ClusterRoleBinding:
		_, err = (&reconciliation.ReconcileRoleBindingOptions{Confirm: true, RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: o},
			Client: reconciliation.ClusterRoleBindingClientAdapter{Client: c.RbacV1().ClusterRoleBindings()}}).Run()
	case *rbacv1.Role:
		_, err = (&reconciliation.ReconcileRoleOptions{Confirm: true, Role: reconciliation.RoleRuleOwner{Role: o},
			Client: reconciliation.RoleModifier{Client: c.RbacV1(), NamespaceClient: c.CoreV1().Namespaces()}}).Run()
	case *rbacv1.RoleBinding:
		_, err = (&reconciliation.ReconcileRoleBindingOptions{Confirm: true, RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: o},
			Client: reconciliation.RoleBindingClientAdapter{Client: c.RbacV1(), NamespaceClient: c.CoreV1().Namespaces()}}).Run()
	default:
		return fmt.Errorf("bootstrap policy: unexpected %T", obj)
	}
	if err != nil {
		return fmt.Errorf("bootstrap policy %T %s: %w", obj, name(obj), err)
	}
	return nil
}

func name(obj runtime.Object) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}
