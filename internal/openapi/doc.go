// Package openapi holds the OpenAPI definitions of the k8s.io/api types the
// core tier serves, generated with openapi-gen. Server-side apply (list merge
// keys, field managers), fieldValidation=Strict and kubectl explain are built
// on them.
package openapi

//go:generate go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --output-dir . --output-pkg github.com/kubeembed/apiserver/internal/openapi --output-file zz_generated.openapi.go --report-filename - --go-header-file /dev/null k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/version k8s.io/api/admissionregistration/v1 k8s.io/api/admissionregistration/v1beta1 k8s.io/api/apps/v1 k8s.io/api/authentication/v1 k8s.io/api/authorization/v1 k8s.io/api/autoscaling/v1 k8s.io/api/autoscaling/v2 k8s.io/api/batch/v1 k8s.io/api/certificates/v1 k8s.io/api/coordination/v1 k8s.io/api/core/v1 k8s.io/api/discovery/v1 k8s.io/api/events/v1 k8s.io/api/flowcontrol/v1 k8s.io/api/networking/v1 k8s.io/api/node/v1 k8s.io/api/policy/v1 k8s.io/api/rbac/v1 k8s.io/api/resource/v1 k8s.io/api/scheduling/v1 k8s.io/api/scheduling/v1alpha3 k8s.io/api/storage/v1 k8s.io/api/storagemigration/v1
