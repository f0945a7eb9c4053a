/*
Copyright 2026 The memcached-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1 "example.com/memcached-operator/api/v1"
)

// nolint:unused
// log is for logging in this package.
var memcachedlog = logf.Log.WithName("memcached-resource")

// The defaults of a Memcached.
const (
	DefaultImage    = "memcached:1.6.38"
	DefaultPort     = int32(11211)
	DefaultReplicas = int32(1)
)

// SetupMemcachedWebhookWithManager registers the webhook for Memcached in the manager.
func SetupMemcachedWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &cachev1.Memcached{}).
		WithValidator(&MemcachedCustomValidator{}).
		WithDefaulter(&MemcachedCustomDefaulter{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-cache-example-com-v1-memcached,mutating=true,failurePolicy=fail,sideEffects=None,groups=cache.example.com,resources=memcacheds,verbs=create;update,versions=v1,name=mmemcached-v1.kb.io,admissionReviewVersions=v1

// MemcachedCustomDefaulter sets default values on the fields of a Memcached
// left empty.
type MemcachedCustomDefaulter struct{}

// Default implements admission.Defaulter.
func (d *MemcachedCustomDefaulter) Default(_ context.Context, m *cachev1.Memcached) error {
	memcachedlog.Info("Defaulting for Memcached", "name", m.GetName())
	if m.Spec.Replicas == nil {
		m.Spec.Replicas = new(DefaultReplicas)
	}
	if m.Spec.Image == "" {
		m.Spec.Image = DefaultImage
	}
	if m.Spec.Port == 0 {
		m.Spec.Port = DefaultPort
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-cache-example-com-v1-memcached,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.example.com,resources=memcacheds,verbs=create;update,versions=v1,name=vmemcached-v1.kb.io,admissionReviewVersions=v1

// MemcachedCustomValidator checks what the CRD's schema cannot: a pinned
// image, a name short enough for the Deployment's pods, and a port that
// does not change.
type MemcachedCustomValidator struct{}

// ValidateCreate implements admission.Validator.
func (v *MemcachedCustomValidator) ValidateCreate(_ context.Context, m *cachev1.Memcached) (admission.Warnings, error) {
	memcachedlog.Info("Validation for Memcached upon creation", "name", m.GetName())
	return warnings(m), invalid(m, validate(m))
}

// ValidateUpdate implements admission.Validator.
func (v *MemcachedCustomValidator) ValidateUpdate(_ context.Context, old, m *cachev1.Memcached) (admission.Warnings, error) {
	memcachedlog.Info("Validation for Memcached upon update", "name", m.GetName())
	errs := validate(m)
	if old.Spec.Port != 0 && m.Spec.Port != old.Spec.Port {
		errs = append(errs, field.Invalid(field.NewPath("spec", "port"), m.Spec.Port, "field is immutable"))
	}
	return warnings(m), invalid(m, errs)
}

// ValidateDelete implements admission.Validator.
func (v *MemcachedCustomValidator) ValidateDelete(_ context.Context, _ *cachev1.Memcached) (admission.Warnings, error) {
	return nil, nil
}

// maxNameLength keeps the names of the Deployment's pods (name-<hash>-<id>)
// within a DNS label.
const maxNameLength = 47

func validate(m *cachev1.Memcached) field.ErrorList {
	var errs field.ErrorList
	if len(m.Name) > maxNameLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), m.Name, maxNameLength))
	}
	if image := m.Spec.Image; !pinned(image) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "image"), image, "must be pinned to a version tag or a digest, not latest"))
	}
	return errs
}

// pinned says whether an image names a tag other than latest, or a digest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") { // no tag, or a registry port
		return false
	}
	return image[i+1:] != "latest"
}

func warnings(m *cachev1.Memcached) admission.Warnings {
	if m.Spec.Replicas != nil && *m.Spec.Replicas == 0 {
		return admission.Warnings{"spec.replicas is 0: the cache is down"}
	}
	return nil
}

func invalid(m *cachev1.Memcached, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(cachev1.GroupVersion.WithKind("Memcached").GroupKind(), m.Name, errs)
}
