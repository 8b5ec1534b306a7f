package providertest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/runtime"
)

// Served is a recorded stream, under the adapter's testdata, and the model that the
// adapter reports served the call.
type Served struct {
	File, Model string
}

// TestServedModel streams each recording and checks that the adapter reports the model
// that served the call once, first, just before another event. Then it makes a call
// that fails with a.ErrorEvent before its first delta and, retried, answers with the
// first recording: the failed attempt reports nothing (a report alone would have kept
// the retry from happening), the one that answered reports once.
func TestServedModel(t *testing.T, a Adapter, served []Served) {
	for _, tc := range served {
		t.Run(testName(tc.File), func(t *testing.T) {
			m, _, _ := a.model(t, Config{}, sse(tc.File))
			checkServed(t, stream(t, m), tc.Model)
		})
	}
	if len(served) == 0 {
		return
	}
	t.Run("retried", func(t *testing.T) {
		m, srv, _ := a.model(t, Config{}, sse(a.ErrorEvent), sse(served[0].File))
		checkServed(t, stream(t, m), served[0].Model)
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

// stream reads m's whole answer to Hello, failing t on an error.
func stream(t *testing.T, m runtime.Model) []runtime.ModelEvent {
	t.Helper()
	var evs []runtime.ModelEvent
	for ev, err := range m.Stream(t.Context(), Hello) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// checkServed checks that evs report model, once, as their first event and not their
// only one.
func checkServed(t *testing.T, evs []runtime.ModelEvent, model string) {
	t.Helper()
	var reports []runtime.ModelEvent
	for _, ev := range evs {
		if ev.Kind == runtime.ModelResponseInfo {
			reports = append(reports, ev)
		}
	}
	want := runtime.ModelEvent{Kind: runtime.ModelResponseInfo, Index: -1, Name: model}
	switch {
	case len(reports) != 1:
		t.Errorf("%d reports of the served model %v, want 1", len(reports), reports)
	case len(evs) < 2 || !cmp.Equal(want, evs[0]):
		t.Errorf("events begin %+v; want the report %+v, then the answer", evs[:min(len(evs), 2)], want)
	}
}
