package service_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/agentdtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(agentdtest.Main(m))
}
