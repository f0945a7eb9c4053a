package persistentvolume_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/persistentvolume"
	"github.com/kubeembed/apiserver/controllers/provisioner"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// ignoreServerFields are the fields the server sets that a test cannot
// know.
var ignoreServerFields = cmp.Options{
	cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "CreationTimestamp", "ManagedFields"),
	cmpopts.IgnoreFields(corev1.PersistentVolumeClaimCondition{}, "LastTransitionTime"),
	cmpopts.IgnoreFields(corev1.PersistentVolumeStatus{}, "LastPhaseTransitionTime"),
	cmpopts.IgnoreFields(corev1.ObjectReference{}, "ResourceVersion"),
	quantities,
}

func TestImmediateClaimIsProvisionedAndBound(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	createClass(t, c, "fast", provisioner.Name, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	created := createClaim(t, c, claim("data", "1Gi", ptr.To("fast")))
	apiservertest.WaitIdle(t, srv)

	pvName := "pvc-" + string(created.UID)
	gi := resource.MustParse("1Gi")
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	wantClaim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", Finalizers: []string{"kubernetes.io/pvc-protection"},
			Annotations: map[string]string{
				"pv.kubernetes.io/bind-completed":               "yes",
				"pv.kubernetes.io/bound-by-controller":          "yes",
				"volume.beta.kubernetes.io/storage-provisioner": provisioner.Name,
				"volume.kubernetes.io/storage-provisioner":      provisioner.Name,
			}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo, StorageClassName: ptr.To("fast"), VolumeName: pvName,
			VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: gi}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: corev1.ResourceList{corev1.ResourceStorage: gi},
			Conditions: []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimUnused, Status: corev1.ConditionTrue,
				Reason: "NoPodsUsingPVC", Message: "No pods are currently referencing this PVC"}}},
	}
	gotClaim := getClaim(t, c, "data")
	assert.Empty(t, cmp.Diff(wantClaim, gotClaim, ignoreServerFields), "claim (-want +got)")
	assert.Contains(t, managers(gotClaim.ManagedFields), "kube-controller-manager/Update")
	assert.Contains(t, managers(gotClaim.ManagedFields), "kube-controller-manager/Update/status")

	wantVolume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Finalizers: []string{"kubernetes.io/pv-protection"},
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner.Name}},
		Spec: corev1.PersistentVolumeSpec{AccessModes: rwo, Capacity: corev1.ResourceList{corev1.ResourceStorage: gi},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data", UID: created.UID},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, StorageClassName: "fast",
			VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/var/local-path-provisioner/" + pvName + "_default_data", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	gotVolume := getVolume(t, c, pvName)
	assert.Empty(t, cmp.Diff(wantVolume, gotVolume, ignoreServerFields), "volume (-want +got)")
	assert.NotEmpty(t, gotVolume.Spec.ClaimRef.ResourceVersion)
	assert.NotNil(t, gotVolume.Status.LastPhaseTransitionTime)
	assert.Contains(t, managers(gotVolume.ManagedFields), "local-path-provisioner/Update")
	assert.Contains(t, managers(gotVolume.ManagedFields), "kube-controller-manager/Update/status")

	e := waitEvent(t, c, "default", "data", "ExternalProvisioning")
	assert.Equal(t, persistentvolume.Component, e.Source.Component)
	assert.Equal(t, "Waiting for a volume to be created either by the external provisioner 'kubeembed.io/simulated' or manually by the system administrator. "+
		"If volume creation is delayed, please verify that the provisioner is running and correctly registered.", e.Message)
	e = waitEvent(t, c, "default", "data", "Provisioning")
	assert.True(t, strings.HasPrefix(e.Source.Component, provisioner.Name+"_"), e.Source.Component)
	assert.Equal(t, `External provisioner is provisioning volume for claim "default/data"`, e.Message)
	e = waitEvent(t, c, "default", "data", "ProvisioningSucceeded")
	assert.Equal(t, "Successfully provisioned volume "+pvName, e.Message)
}

func TestWaitForFirstConsumer(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	created := createClaim(t, c, claim("data", "2Gi", standard))
	apiservertest.WaitIdle(t, srv)
	got := getClaim(t, c, "data")
	assert.Equal(t, corev1.ClaimPending, got.Status.Phase)
	assert.Empty(t, got.Spec.VolumeName)
	e := waitEvent(t, c, "default", "data", "WaitForFirstConsumer")
	assert.Equal(t, "waiting for first consumer to be created before binding", e.Message)

	// A pod that uses it, not scheduled yet: the next sync says so.
	_, err := c.CoreV1().Pods("default").Create(ctx, podUsing("app", "data"), metav1.CreateOptions{})
	require.NoError(t, err)
	got.Labels = map[string]string{"touched": "yes"}
	_, err = c.CoreV1().PersistentVolumeClaims("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	e = waitEvent(t, c, "default", "data", "WaitForPodScheduled")
	assert.Equal(t, "waiting for pod app to be scheduled", e.Message)
	vols, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, vols.Items, "nothing is provisioned before a node is selected")

	// The scheduler's VolumeBinding: select the node, then bind the pod.
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1",
		Labels: map[string]string{"kubernetes.io/hostname": "node-1-host"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	got = getClaim(t, c, "data")
	metav1.SetMetaDataAnnotation(&got.ObjectMeta, "volume.kubernetes.io/selected-node", "node-1")
	_, err = c.CoreV1().PersistentVolumeClaims("default").Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	got = getClaim(t, c, "data")
	assert.Equal(t, corev1.ClaimBound, got.Status.Phase)
	assert.Equal(t, "pvc-"+string(created.UID), got.Spec.VolumeName)
	assert.Equal(t, "yes", got.Annotations["pv.kubernetes.io/bind-completed"])
	pv := getVolume(t, c, got.Spec.VolumeName)
	assert.Equal(t, corev1.VolumeBound, pv.Status.Phase)
	wantAffinity := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1-host"}}}}}}}
	assert.Empty(t, cmp.Diff(wantAffinity, pv.Spec.NodeAffinity), "node affinity (-want +got)")
	assert.Equal(t, "standard", pv.Spec.StorageClassName)
	assert.Equal(t, corev1.PersistentVolumeReclaimDelete, pv.Spec.PersistentVolumeReclaimPolicy)

	err = c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	unused := getClaim(t, c, "data").Status.Conditions
	require.Len(t, unused, 1)
	assert.Equal(t, corev1.ConditionFalse, unused[0].Status)
	assert.Equal(t, "PodUsingPVC", unused[0].Reason)
}

// podUsing is a pod with claim as its volume.
func podUsing(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

func TestStaticVolumesAreBoundByMatching(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	rwo, rwx, rox := corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany
	for _, pv := range []*corev1.PersistentVolume{
		hostPathVolume("small", "1Gi", "", rwo), hostPathVolume("large", "5Gi", "", rwo),
		hostPathVolume("shared", "1Gi", "", rwo, rwx), hostPathVolume("named", "3Gi", "", rwo),
	} {
		_, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, corev1.VolumeAvailable, getVolume(t, c, "small").Status.Phase)

	createClaim(t, c, claim("fits", "1Gi", noClass))            // smallest, fewest modes
	createClaim(t, c, claim("many", "1Gi", noClass, rwx))       // needs RWX
	createClaim(t, c, claim("huge", "10Gi", noClass))           // nothing that big
	createClaim(t, c, claim("read-only", "1Gi", noClass, rox))  // no ROX volume
	createClaim(t, c, claim("other-class", "1Gi", ptr.To("x"))) // no such class, and the volumes have none
	named := claim("pinned", "1Gi", noClass)
	named.Spec.VolumeName = "named"
	createClaim(t, c, named)
	apiservertest.WaitIdle(t, srv)

	for claimName, volume := range map[string]string{"fits": "small", "many": "shared", "pinned": "named"} {
		got := getClaim(t, c, claimName)
		assert.Equal(t, volume, got.Spec.VolumeName, claimName)
		assert.Equal(t, corev1.ClaimBound, got.Status.Phase, claimName)
		pv := getVolume(t, c, volume)
		assert.Equal(t, corev1.VolumeBound, pv.Status.Phase, volume)
		assert.Equal(t, "yes", pv.Annotations["pv.kubernetes.io/bound-by-controller"], volume)
		assert.Equal(t, got.UID, pv.Spec.ClaimRef.UID, volume)
	}
	// The user named the volume: the claim is not bound "by controller".
	assert.NotContains(t, getClaim(t, c, "pinned").Annotations, "pv.kubernetes.io/bound-by-controller")
	assert.Equal(t, "yes", getClaim(t, c, "fits").Annotations["pv.kubernetes.io/bound-by-controller"])
	for _, name := range []string{"huge", "read-only", "other-class"} {
		got := getClaim(t, c, name)
		assert.Equal(t, corev1.ClaimPending, got.Status.Phase, name)
		assert.Empty(t, got.Spec.VolumeName, name)
	}
	assert.Equal(t, corev1.VolumeAvailable, getVolume(t, c, "large").Status.Phase)
	e := waitEvent(t, c, "default", "huge", "FailedBinding")
	assert.Equal(t, "no persistent volumes available for this claim and no storage class is set", e.Message)
}

// A claim created right after its volume is bound however the two
// workers meet them: the claim worker may sync the claim before the volume
// worker has put the volume in the controller's cache, and the volume must
// then bring the claim back (CI once saw the claim left Pending after
// WaitIdle, with its volume Available).
func TestClaimCreatedJustAfterItsVolumeIsBound(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	const pairs = 30
	for i := range pairs {
		class := fmt.Sprintf("pair-%d", i) // one volume fits one claim
		_, err := c.CoreV1().PersistentVolumes().Create(t.Context(), hostPathVolume(class, "1Gi", class, corev1.ReadWriteOnce), metav1.CreateOptions{})
		require.NoError(t, err)
		createClaim(t, c, claim(class, "1Gi", ptr.To(class)))
	}
	apiservertest.WaitIdle(t, srv)
	for i := range pairs {
		name := fmt.Sprintf("pair-%d", i)
		assert.Equal(t, corev1.ClaimBound, getClaim(t, c, name).Status.Phase, name)
		assert.Equal(t, corev1.VolumeBound, getVolume(t, c, name).Status.Phase, name)
	}
}

func TestClaimWithNoClassGetsTheDefault(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	// kube-apiserver lets a claim's class go from none to one (the
	// retroactive default class, GA in 1.28); a server that does not would
	// keep the controller retrying.
	probe := createClaim(t, c, claim("probe", "1Gi", nil))
	probe.Spec.StorageClassName = standard
	if _, err := c.CoreV1().PersistentVolumeClaims("default").Update(ctx, probe, metav1.UpdateOptions{}); apierrors.IsInvalid(err) {
		t.Skipf("the server refuses to set a claim's class after creation: %v", err)
	}
	// Made before there was a default (the admission plugin would have
	// given it one): the PV controller gives it the default class.
	createClaim(t, c, claim("late", "1Gi", nil))
	apiservertest.WaitIdle(t, srv)
	got := getClaim(t, c, "late")
	assert.Equal(t, standard, got.Spec.StorageClassName)
	assert.Equal(t, corev1.ClaimPending, got.Status.Phase)
	waitEvent(t, c, "default", "late", "WaitForFirstConsumer")
}

func TestDeletedClaimReleasesItsVolume(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	createClass(t, c, "scratch", provisioner.Name, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	createClass(t, c, "keep", provisioner.Name, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimRetain)
	scratch := createClaim(t, c, claim("scratch", "1Gi", ptr.To("scratch")))
	kept := createClaim(t, c, claim("kept", "1Gi", ptr.To("keep")))
	apiservertest.WaitIdle(t, srv)
	require.Equal(t, corev1.ClaimBound, getClaim(t, c, "scratch").Status.Phase)
	require.Equal(t, corev1.ClaimBound, getClaim(t, c, "kept").Status.Phase)

	for _, name := range []string{"scratch", "kept"} {
		require.NoError(t, c.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{}))
	}
	apiservertest.WaitIdle(t, srv)

	for _, name := range []string{"scratch", "kept"} {
		_, err := c.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "claim %s: %v", name, err)
	}
	_, err := c.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(scratch.UID), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Delete volume is deleted: %v", err)
	pv := getVolume(t, c, "pvc-"+string(kept.UID))
	assert.Equal(t, corev1.VolumeReleased, pv.Status.Phase, "the Retain volume is Released")
	assert.Equal(t, kept.UID, pv.Spec.ClaimRef.UID)
	assert.Nil(t, pv.DeletionTimestamp)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	createClass(t, c, "elsewhere", "example.com/other", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	createClass(t, c, "local", "kubernetes.io/no-provisioner", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	createClaim(t, c, claim("missing-class", "1Gi", ptr.To("missing")))
	createClaim(t, c, claim("other-provisioner", "1Gi", ptr.To("elsewhere")))
	createClaim(t, c, claim("in-tree", "1Gi", ptr.To("local")))
	apiservertest.WaitIdle(t, srv)

	e := waitEvent(t, c, "default", "missing-class", "ProvisioningFailed")
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, `storageclass.storage.k8s.io "missing" not found`, e.Message)
	e = waitEvent(t, c, "default", "in-tree", "ProvisioningFailed")
	assert.Equal(t, "no volume plugin matched name: kubernetes.io/no-provisioner", e.Message)
	// Another provisioner's claim is handed to it and left alone.
	waitEvent(t, c, "default", "other-provisioner", "ExternalProvisioning")
	other := getClaim(t, c, "other-provisioner")
	assert.Equal(t, "example.com/other", other.Annotations["volume.kubernetes.io/storage-provisioner"])
	vols, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, vols.Items)

	// No hot loop: nothing is written while nothing changes.
	before := map[string]string{}
	for _, name := range []string{"missing-class", "other-provisioner", "in-tree"} {
		got := getClaim(t, c, name)
		assert.Equal(t, corev1.ClaimPending, got.Status.Phase, name)
		before[name] = got.ResourceVersion
	}
	apiservertest.WaitIdle(t, srv)
	for name, rv := range before {
		assert.Equal(t, rv, getClaim(t, c, name).ResourceVersion, name)
	}

	// The class appears: its claim is provisioned without waiting for the
	// resync.
	createClass(t, c, "missing", provisioner.Name, storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, corev1.ClaimBound, getClaim(t, c, "missing-class").Status.Phase)
}
