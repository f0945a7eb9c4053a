package embedded

// Room on the data directory's filesystem. etcd stops its process
// (zap Fatal: "failed to commit tx", "failed to save Raft hard state") when
// a write fails for want of space, which in a server that embeds it is the
// whole API server. So the member's backend quota (etcd's
// --quota-backend-bytes) is set from the room there is: the database
// reaches the quota first, and etcd refuses the writes that do not fit
// with its NOSPACE alarm ("etcdserver: mvcc: database space exceeded",
// which the API server answers as a 500, as kube-apiserver does), reads
// and deletes still served.
//
// The write-ahead log's segments are 8 MiB here, not etcd's 64 MB: etcd
// allocates a segment whole when it makes one, and one more ahead, so a
// member took 128 MiB of disk before its first write, which a test suite
// of parallel servers on embedded etcd paid for each (CI on a machine with
// little room in its temporary directory failed on it). A member now
// takes 16 MiB at start. wal.SegmentSizeBytes is etcd's package variable,
// set once when this package is initialised: it also applies to any other
// etcd server of the process (etcd reads logs of any segment size).

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/etcd/server/v3/storage/wal"
)

const (
	// walSegment is the size of one segment of etcd's write-ahead log,
	// allocated whole when the segment is made (wal.SegmentSizeBytes).
	walSegment = 8 << 20
	// maxWALs is how many segments etcd keeps once a snapshot no longer
	// needs them (etcd's --max-wals, default 5); one more is made ahead.
	maxWALs = 2
	// reserve is the room the log's kept and next segments and etcd's
	// snapshot files take.
	reserve = (maxWALs+1)*walSegment + 32<<20
	// minQuota is the least database room a member starts with.
	minQuota = 32 << 20
)

func init() { wal.SegmentSizeBytes = walSegment }

// quota is the backend quota for a member in dir, at most etcd's default
// (2 GiB): half of the room there is beyond the reserve (what is free,
// plus what its database and log already use), because what a write puts
// in the database it also puts in the log, which etcd trims only after
// its next snapshot. It fails when that is under minQuota, saying how
// much room there is.
func quota(dir string) (int64, error) {
	free, ok, err := freeBytes(dir)
	if err != nil || !ok {
		return storage.DefaultQuotaBytes, err
	}
	used := int64(0)
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				used += info.Size()
			}
		}
		return nil
	})
	room := (free + used - reserve) / 2
	if room < minQuota {
		return 0, fmt.Errorf("%d MiB free on the data directory's filesystem: etcd needs %d MiB: %d MiB for its write-ahead log and snapshots, at least %d MiB for its data and as much for the data's copy in the log",
			free>>20, (reserve+2*minQuota)>>20, reserve>>20, minQuota>>20)
	}
	return min(room, storage.DefaultQuotaBytes), nil
}

// disarmNoSpace clears a NOSPACE alarm that an earlier run raised when the
// database fits in the quota now (the member restarted with more room):
// etcd keeps the alarm in its database, so without this every write
// would still be refused, as until an operator's "etcdctl alarm disarm".
func (s *Server) disarmNoSpace(ctx context.Context, quota int64) error {
	srv := s.etcd.Server
	for _, a := range srv.Alarms() {
		if a.Alarm != pb.AlarmType_NOSPACE || srv.Backend().Size() >= quota {
			continue
		}
		_, err := srv.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: a.MemberID, Alarm: pb.AlarmType_NOSPACE})
		if err != nil {
			return fmt.Errorf("disarm the NOSPACE alarm: %w", err)
		}
	}
	return nil
}
