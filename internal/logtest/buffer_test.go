package logtest_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/logtest"
)

// Loggers on many goroutines write into one Buffer while the test reads it (the race
// detector would see a data race), and every record comes back whole.
func TestBuffer_ConcurrentLogs(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				log.Info("step", "writer", w, "i", i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	recs := buf.Records(t)
	if len(recs) != writers*each {
		t.Fatalf("%d records, want %d", len(recs), writers*each)
	}
	seen := map[[2]float64]bool{}
	for _, r := range recs {
		if r["msg"] != "step" {
			t.Fatalf("record %v, want msg step", r)
		}
		seen[[2]float64{r["writer"].(float64), r["i"].(float64)}] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct records, want %d", len(seen), writers*each)
	}
}
