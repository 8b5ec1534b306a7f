package service_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/agentdtest"
	"github.com/agentd/agentd/service/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Main(agentdtest.Main(m)))
}
