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

package v1alpha1

import (
	"maps"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	cachev1 "example.com/memcached-operator/api/v1"
)

// v1 fields v1alpha1 cannot express are kept in annotations, so that a
// round trip through v1alpha1 loses nothing.
const (
	imageAnnotation = "cache.example.com/image"
	portAnnotation  = "cache.example.com/port"
	imageRepository = "memcached:"
)

// ConvertTo converts this Memcached (v1alpha1) to the Hub version (v1).
func (src *Memcached) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*cachev1.Memcached)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec.Replicas = new(src.Spec.Size)
	if src.Spec.Version != "" {
		dst.Spec.Image = imageRepository + src.Spec.Version
	}
	if image, ok := src.Annotations[imageAnnotation]; ok {
		dst.Spec.Image = image
	}
	if port, err := strconv.ParseInt(src.Annotations[portAnnotation], 10, 32); err == nil {
		dst.Spec.Port = int32(port)
	}
	if dst.Annotations != nil {
		delete(dst.Annotations, imageAnnotation)
		delete(dst.Annotations, portAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
	}
	dst.Status.Conditions = src.Status.Conditions
	return nil
}

// ConvertFrom converts from the Hub version (v1) to this version.
func (dst *Memcached) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*cachev1.Memcached)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = MemcachedSpec{}
	if src.Spec.Replicas != nil {
		dst.Spec.Size = *src.Spec.Replicas
	}
	extra := map[string]string{}
	if version, ok := strings.CutPrefix(src.Spec.Image, imageRepository); ok && !strings.ContainsAny(version, ":@/") {
		dst.Spec.Version = version
	} else if src.Spec.Image != "" {
		extra[imageAnnotation] = src.Spec.Image
	}
	if src.Spec.Port != 0 {
		extra[portAnnotation] = strconv.Itoa(int(src.Spec.Port))
	}
	if len(extra) > 0 {
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		maps.Copy(dst.Annotations, extra)
	}
	dst.Status.Conditions = src.Status.Conditions
	return nil
}
