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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1 "example.com/memcached-operator/api/v1"
	cachev1alpha1 "example.com/memcached-operator/api/v1alpha1"
	// TODO (user): Add any additional imports if needed
)

var _ = Describe("Memcached Webhook", func() {
	var (
		obj       *cachev1.Memcached
		oldObj    *cachev1.Memcached
		validator MemcachedCustomValidator
		defaulter MemcachedCustomDefaulter
	)

	BeforeEach(func() {
		obj = &cachev1.Memcached{}
		oldObj = &cachev1.Memcached{}
		validator = MemcachedCustomValidator{}
		Expect(validator).NotTo(BeNil(), "Expected validator to be initialized")
		defaulter = MemcachedCustomDefaulter{}
		Expect(defaulter).NotTo(BeNil(), "Expected defaulter to be initialized")
		Expect(oldObj).NotTo(BeNil(), "Expected oldObj to be initialized")
		Expect(obj).NotTo(BeNil(), "Expected obj to be initialized")
	})

	Context("When creating Memcached under Defaulting Webhook", func() {
		It("Should apply defaults when a required field is empty", func() {
			By("calling the Default method to apply defaults")
			Expect(defaulter.Default(ctx, obj)).To(Succeed())
			By("checking that the default values are set")
			Expect(obj.Spec.Replicas).To(HaveValue(Equal(DefaultReplicas)))
			Expect(obj.Spec.Image).To(Equal(DefaultImage))
			Expect(obj.Spec.Port).To(Equal(DefaultPort))
		})

		It("Should default through the API server", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "defaulted", Namespace: "default"}}
			Expect(k8sClient.Create(ctx, m)).To(Succeed())
			DeferCleanup(k8sClient.Delete, ctx, m)
			Expect(m.Spec.Replicas).To(HaveValue(Equal(DefaultReplicas)))
			Expect(m.Spec.Image).To(Equal(DefaultImage))
			Expect(m.Spec.Port).To(Equal(DefaultPort))
		})
	})

	Context("When creating or updating Memcached under Validating Webhook", func() {
		It("Should deny creation if the image is not pinned", func() {
			obj.Spec.Image = "memcached:latest"
			_, err := validator.ValidateCreate(ctx, obj)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("must be pinned to a version tag or a digest"))
		})

		It("Should admit creation if all required fields are present", func() {
			obj.Spec.Image = "registry.example.com:5000/memcached@sha256:0123"
			Expect(validator.ValidateCreate(ctx, obj)).To(BeNil())
		})

		It("Should deny an unpinned image through the API server with the webhook's error", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "unpinned", Namespace: "default"},
				Spec: cachev1.MemcachedSpec{Image: "memcached"}}
			err := k8sClient.Create(ctx, m)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(Equal(`admission webhook "vmemcached-v1.kb.io" denied the request: ` +
				`Memcached.cache.example.com "unpinned" is invalid: spec.image: Invalid value: "memcached": must be pinned to a version tag or a digest, not latest`))
		})

		It("Should validate updates correctly", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "port", Namespace: "default"}}
			Expect(k8sClient.Create(ctx, m)).To(Succeed())
			DeferCleanup(k8sClient.Delete, ctx, m)
			m.Spec.Port = 11311
			err := k8sClient.Update(ctx, m)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("spec.port: Invalid value: 11311: field is immutable"))
		})

		It("Should warn when scaled to zero", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "zero", Namespace: "default"},
				Spec: cachev1.MemcachedSpec{Replicas: new(int32(0)), Image: DefaultImage}}
			warnings, err := validator.ValidateCreate(ctx, m)
			Expect(err).NotTo(HaveOccurred())
			Expect(warnings).To(ConsistOf("spec.replicas is 0: the cache is down"))
		})

		It("Should reject what the CRD's schema forbids before any webhook", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "many", Namespace: "default"},
				Spec: cachev1.MemcachedSpec{Replicas: new(int32(11))}}
			err := k8sClient.Create(ctx, m)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"))
		})
	})

	Context("When converting Memcached between versions", func() {
		It("Should store a v1alpha1 object as v1 and read it back in both", func() {
			old := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "default"},
				Spec: cachev1alpha1.MemcachedSpec{Size: 2, Version: "1.6.38"}}
			Expect(k8sClient.Create(ctx, old)).To(Succeed())
			DeferCleanup(k8sClient.Delete, ctx, old)

			m := &cachev1.Memcached{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), m)).To(Succeed())
			Expect(m.Spec.Replicas).To(HaveValue(Equal(int32(2))))
			Expect(m.Spec.Image).To(Equal("memcached:1.6.38"))
			Expect(m.Spec.Port).To(Equal(DefaultPort), "defaulted by the v1 webhook, through conversion")
			Expect(m.Annotations).To(BeEmpty())

			again := &cachev1alpha1.Memcached{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), again)).To(Succeed())
			Expect(again.Spec).To(Equal(old.Spec))
			Expect(again.Annotations).To(HaveKeyWithValue("cache.example.com/port", "11211"))
		})

		It("Should keep what v1alpha1 cannot express through a v1alpha1 update", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "roundtrip", Namespace: "default"},
				Spec: cachev1.MemcachedSpec{Image: "registry.example.com/cache/memcached:1.6.38-alpine", Port: 11311}}
			Expect(k8sClient.Create(ctx, m)).To(Succeed())
			DeferCleanup(k8sClient.Delete, ctx, m)

			old := &cachev1alpha1.Memcached{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(m), old)).To(Succeed())
			Expect(old.Spec.Version).To(BeEmpty())
			old.Spec.Size = 4
			Expect(k8sClient.Update(ctx, old)).To(Succeed())

			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
			Expect(m.Spec.Replicas).To(HaveValue(Equal(int32(4))))
			Expect(m.Spec.Image).To(Equal("registry.example.com/cache/memcached:1.6.38-alpine"))
			Expect(m.Spec.Port).To(Equal(int32(11311)))
		})

		It("Should list every object in the older version", func() {
			m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "listed", Namespace: "default"}}
			Expect(k8sClient.Create(ctx, m)).To(Succeed())
			DeferCleanup(k8sClient.Delete, ctx, m)
			list := &cachev1alpha1.MemcachedList{}
			Expect(k8sClient.List(ctx, list, client.InNamespace("default"))).To(Succeed())
			names := []string{}
			for _, item := range list.Items {
				Expect(item.APIVersion).To(Equal("cache.example.com/v1alpha1"))
				names = append(names, item.Name)
			}
			Expect(names).To(ContainElement("listed"))
		})
	})
})
