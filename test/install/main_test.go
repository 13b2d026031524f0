package install

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// envtest and the clients log through controller-runtime; the tests
	// report what matters themselves.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
