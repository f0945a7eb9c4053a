package core

import (
	"context"
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

var isConfigMapKey = utilvalidation.IsConfigMapKey

func defaultSecret(s *corev1.Secret) {
	// kube-apiserver folds stringData into data when it converts a request
	// to its internal version, before it records managed fields: the writer
	// owns data's keys.
	mergeStringData(s)
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

var secrets = registry.Kind[*corev1.Secret]{
	Default:      defaultSecret,
	GroupVersion: corev1.SchemeGroupVersion, Resource: "secrets", Singular: "secret", Namespaced: true,
	NewObj:            func() runtime.Object { return &corev1.Secret{} },
	NewList:           func() runtime.Object { return &corev1.SecretList{} },
	PrepareCreate:     func(_ context.Context, s *corev1.Secret) { mergeStringData(s) },
	PrepareUpdate:     func(s, _ *corev1.Secret) { mergeStringData(s) },
	Validate:          validateSecret,
	UpdateChecksFirst: true,
	ValidateUpdate: func(s, old *corev1.Secret) field.ErrorList {
		errs := apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))
		return append(errs, validateImmutable(s.Immutable, old.Immutable, fieldChange{"data", !reflect.DeepEqual(s.Data, old.Data)})...)
	},
	Columns: []registry.Column{
		registry.ColumnOf("Type", "string", corev1.Secret{}.SwaggerDoc()["type"], 0, func(s *corev1.Secret) any { return string(s.Type) }),
		registry.ColumnOf("Data", "string", corev1.Secret{}.SwaggerDoc()["data"], 0, func(s *corev1.Secret) any { return int64(len(s.Data)) }),
	},
	Fields:     func(s *corev1.Secret) fields.Set { return fields.Set{"type": string(s.Type)} },
	FieldNames: []string{"type"},
}

// mergeStringData folds the write-only stringData into data, as the real
// server does before validation and storage.
func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range s.Data {
		for _, msg := range isConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxDataSize {
		errs = append(errs, field.TooLong(dataPath, "", maxDataSize))
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, requireJSONKey(s, corev1.DockerConfigKey)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, requireJSONKey(s, corev1.DockerConfigJsonKey)...)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

func requireJSONKey(s *corev1.Secret, key string) field.ErrorList {
	p := field.NewPath("data").Key(key)
	raw, ok := s.Data[key]
	if !ok {
		return field.ErrorList{field.Required(p, "")}
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return field.ErrorList{field.Invalid(p, "<secret contents redacted>", err.Error())}
	}
	return nil
}
