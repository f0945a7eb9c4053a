package embedded

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/internal/globals"
)

// A port picked free and taken before etcd binds it (CI: another test's
// connection got it) is picked again. Serial: it replaces pickPort, which
// every Start of the package's parallel tests calls.
func TestStartPicksAgainWhenAPortIsTaken(t *testing.T) {
	globals.InitKlog()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	picks := 0
	pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return freePort()
	}
	defer func() { pickPort = freePort }()
	s, err := Start(t.Context(), Options{UnsafeNoFsync: true})
	require.NoError(t, err)
	assert.NotEqual(t, taken.Addr().(*net.TCPAddr).Port, s.Options().ClientPort)
	assert.Equal(t, 4, picks, "two ports on each of two attempts")
	require.NoError(t, s.Close())
}

// A port the caller gave is never replaced: a taken one fails Start,
// saying so.
func TestStartKeepsAGivenPort(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, err = Start(t.Context(), Options{ClientPort: taken.Addr().(*net.TCPAddr).Port, PeerPort: 0, UnsafeNoFsync: true})
	require.Error(t, err)
	assert.True(t, addrInUse(err), err)
}
