// Package conformance holds what the backends' runs of the upstream storage
// conformance suite (k8s.io/apiserver/pkg/storage/testing) share.
package conformance

// ExpectedRangeReads is how many reads of the backend a list of
// estimatedProcessedObjects objects makes in pages of pageSize (0: one
// read): etcd3's store doubles its page whenever a page came back short,
// up to maxPage.
func ExpectedRangeReads(pageSize, estimatedProcessedObjects, maxPage uint64) uint64 {
	reads := uint64(1)
	if pageSize == 0 {
		return reads
	}
	limit := pageSize
	for sum := uint64(1); sum < estimatedProcessedObjects; {
		limit = min(limit*2, maxPage)
		sum += limit
		reads++
	}
	return reads
}
