package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func gr(resource string) schema.GroupResource { return schema.GroupResource{Resource: resource} }

func objectAt(rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
}

func byName(m map[schema.GroupResource]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		out[k.String()] = v
	}
	return out
}
