package globals

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kubeembed/apiserver/internal/inproc"
)

// opaque wraps an error without Unwrap, as some libraries do.
type opaque struct{ msg string }

func (o opaque) Error() string { return o.msg }

// A closing server's refused requests are not logged, however their error
// reaches the log; other errors are.
func TestWithoutClosing(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.ErrorLevel)
	log := zap.New(withoutClosing{core})
	log.Error("Couldn't get current server API group list", zap.Error(fmt.Errorf("get /apis: %w", inproc.ErrClosed)))
	log.Error("Couldn't get current server API group list", zap.Error(opaque{"Get \"https://127.0.0.1/apis\": " + inproc.ErrClosed.Error()}))
	log.Error("failed: " + inproc.ErrClosed.Error())
	log.Error("a real failure", zap.Error(errors.New("boom")))
	assert.Equal(t, 1, logs.Len())
	assert.Equal(t, "a real failure", logs.All()[0].Message)
}
