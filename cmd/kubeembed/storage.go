package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// storageFlags choose the backend: memory (the default), an etcd cluster
// (--etcd-servers, kube-apiserver's flags) or etcd embedded in the process
// and persisted in --data-dir.
type storageFlags struct {
	servers, prefix, caFile, certFile, keyFile, dataDir string
	watchCache                                          bool
	dialTimeout                                         time.Duration
}

func (f *storageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.servers, "etcd-servers", "", "etcd client URLs (comma-separated) to store in, as kube-apiserver's flag; default: in memory, or --data-dir")
	fs.StringVar(&f.prefix, "etcd-prefix", etcd.DefaultPrefix, "the prefix of every key in etcd")
	fs.StringVar(&f.caFile, "etcd-cafile", "", "CA of the etcd servers' certificates")
	fs.StringVar(&f.certFile, "etcd-certfile", "", "client certificate for etcd")
	fs.StringVar(&f.keyFile, "etcd-keyfile", "", "client key for etcd")
	fs.DurationVar(&f.dialTimeout, "etcd-dial-timeout", 20*time.Second, "how long to wait for etcd to answer at start")
	fs.BoolVar(&f.watchCache, "watch-cache", true, "serve lists and watches of etcd-backed resources from a watch cache, as kube-apiserver's flag")
	fs.StringVar(&f.dataDir, "data-dir", "", "keep the cluster here across restarts: an embedded etcd (unless --etcd-servers) and the server's keys")
}

// backend is the backend the flags choose; nil for memory (the server
// makes and owns one).
func (f *storageFlags) backend(ctx context.Context, log *zap.Logger) (storage.Backend, error) {
	opts := etcd.Options{Prefix: f.prefix, CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile,
		DialTimeout: f.dialTimeout, WatchCache: f.watchCache, Logger: log.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.WarnLevel))}
	switch {
	case f.servers != "":
		opts.Servers = strings.Split(f.servers, ",")
		return etcd.New(ctx, opts)
	case f.dataDir != "":
		return embedded.NewBackend(ctx, embedded.Options{DataDir: filepath.Join(f.dataDir, "etcd"),
			Logger: log.Named("etcd").WithOptions(zap.IncreaseLevel(zap.WarnLevel))}, opts)
	case f.caFile != "" || f.certFile != "" || f.keyFile != "":
		return nil, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers")
	}
	return nil, nil
}

// certDir keeps the server's keys in the data directory.
func (f *storageFlags) certDir() string {
	if f.dataDir == "" {
		return ""
	}
	return filepath.Join(f.dataDir, "pki")
}

// portFile keeps, in the data directory, the port the server last listened
// on: a dev cluster comes back at the address its kubeconfig names.
func (f *storageFlags) portFile() string {
	if f.dataDir == "" {
		return ""
	}
	return filepath.Join(f.dataDir, "port")
}

// port is the port to listen on: flag's if set, else the one kept in the
// data directory (kept is true), else, with a data directory, a free one
// that lasts (lastingPort), else 0 (a free one).
func (f *storageFlags) port(flag int, bind string) (port int, kept bool, err error) {
	if flag != 0 || f.portFile() == "" {
		return flag, false, nil
	}
	data, err := os.ReadFile(f.portFile())
	if errors.Is(err, fs.ErrNotExist) {
		return lastingPort(bind), false, nil
	}
	if err != nil {
		return 0, false, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, false, fmt.Errorf("%s: not a port: %q", f.portFile(), data)
	}
	return p, true, nil
}

// keepPort writes the server's port to the data directory.
func (f *storageFlags) keepPort(serverURL string) error {
	if f.portFile() == "" {
		return nil
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return err
	}
	// Written aside and renamed: a kill -9 while writing in place would
	// leave an empty file that stops every later start.
	return certs.WriteFile(f.portFile(), []byte(u.Port()+"\n"), 0o600)
}
