package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrNewCA returns the CA kept in dir as name.crt and name.key, making
// and writing one first if there is none. An empty dir keeps nothing: a
// new CA every time.
func LoadOrNewCA(dir, name, commonName string) (*CA, error) {
	if dir == "" {
		return NewCA(commonName)
	}
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		return newCAIn(dir, certFile, keyFile, commonName)
	}
	if err != nil {
		return nil, err
	}
	key, err := LoadOrNewKey(keyFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	return &CA{cert: cert, key: key, CertPEM: certPEM}, nil
}

func newCAIn(dir, certFile, keyFile, commonName string) (*CA, error) {
	ca, err := NewCA(commonName)
	if err != nil {
		return nil, err
	}
	if err := writeKey(dir, keyFile, ca.key); err != nil {
		return nil, err
	}
	if err := WriteFile(certFile, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadOrNewKey returns the P-256 key in file (PEM, "EC PRIVATE KEY"),
// making and writing one first if there is none.
func LoadOrNewKey(file string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return key, writeKey(filepath.Dir(file), file, key)
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM key", file)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return key, nil
}

func writeKey(dir, file string, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// WriteFile writes data to name with mode perm whole or not at all: to a
// temporary file in the same directory, synced, then renamed over name.
// Killed while writing in place, a process would leave a part of a key
// (or an empty file) that every later start refuses.
func WriteFile(name string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
