package providertest

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/runtime/llm/internal/provider"
	"github.com/agentd/agentd/runtime/llm/internal/ssetest"
)

// Adapter describes an adapter to the shared tests. They run in the adapter's package
// directory, whose testdata holds the recorded streams the fields name and these:
//
//   - text.sse: the answer "Hello! How can I help you today?", whose events are Text;
//   - first_delta.sse: the start of an answer whose one delta is the text
//     "Thinking about it", and nothing after it;
//   - cut_after_delta.sse: the same with the delta "The answer", which the tests cut.
type Adapter struct {
	// Provider is the adapter's name, which starts its models' names and its errors' text.
	Provider string
	// Path is the path the adapter posts a call to, under the base URL.
	Path string
	// Model is the model the shared tests call.
	Model string
	// EnvAPIKey and EnvBaseURL name the environment variables that stand in for an
	// empty Config.APIKey and Config.BaseURL.
	EnvAPIKey, EnvBaseURL string
	// New returns a model of the adapter with c's settings, as its New does.
	New func(c Config) (runtime.Model, error)

	// Text is what the adapter makes of testdata/text.sse.
	Text []runtime.ModelEvent
	// Slow is the stream the slow tests send slowly.
	Slow Slow
	// NoFinish is a recorded answer, under testdata, whose deltas are the text "The
	// answer is" and " 42" and which ends without a finish reason.
	NoFinish string
	// ErrorEvent is a recorded stream, under testdata, that fails with an error event of
	// a transient kind before its first delta.
	ErrorEvent string
	// Opening is the start of an SSE stream, as the API sends it, before any delta.
	Opening string

	// The API's error responses: a rate limit (429), a failure of the server (5xx), a
	// bad request (400), and the body of an authentication failure (401).
	RateLimited, ServerError, BadRequest APIError
	Unauthorized                         string
}

// APIError is an error response of a provider's API.
type APIError struct {
	Status int
	// Body is the JSON body the API sends.
	Body string
	// Type is the error type the adapter reads from it, and Text the text of the
	// adapter's error after its provider's name.
	Type, Text string
}

// reply returns e as the fake server's reply, with header added.
func (e APIError) reply(header http.Header) ssetest.Reply {
	return ssetest.JSONError(e.Status, header, e.Body)
}

// Slow is an adapter's slow stream: a recorded answer under testdata, which the adapter
// makes into its Text events too, that the slow tests stream with Gap before each of
// its SSE events, longer in all than Idle, the idle timeout they set, though no gap is.
type Slow struct {
	File      string
	Gap, Idle time.Duration
}

// Config is what the shared tests set in an adapter's Config.
type Config struct {
	Model        string
	APIKey       string
	BaseURL      string
	HTTPClient   *http.Client
	IdleTimeout  time.Duration
	MaxRetries   int
	RetryBackoff time.Duration
	// Sleep replaces the adapter's wait between retries; nil leaves it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Key is the API key the shared tests give an adapter.
const Key = "sk-test-0123456789abcdef"

// Hello is the request the shared tests send.
var Hello = &runtime.ModelRequest{Messages: []runtime.Message{runtime.SystemMessage("Be brief."), runtime.UserMessage("Hello")}}

// mustNew returns a's model with c's settings, failing t if New fails.
func (a Adapter) mustNew(t testing.TB, c Config) runtime.Model {
	t.Helper()
	m, err := a.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// model returns a's model on a fake server answering with replies, and the server and
// the waits between retries, which it records rather than waits unless c sets Sleep.
// The model is a.Model unless c names another; the key is Key.
func (a Adapter) model(t *testing.T, c Config, replies ...ssetest.Reply) (runtime.Model, *ssetest.Server, *ssetest.Sleeps) {
	t.Helper()
	srv := ssetest.New(t, a.Path, replies...)
	s := new(ssetest.Sleeps)
	c.Model, c.APIKey, c.BaseURL, c.HTTPClient = cmp.Or(c.Model, a.Model), Key, srv.URL, srv.Client()
	if c.Sleep == nil {
		c.Sleep = s.Sleep
	}
	return a.mustNew(t, c), srv, s
}

// sse returns a reply that streams the recorded file name, under testdata.
func sse(name string) ssetest.Reply { return ssetest.Reply{File: "testdata/" + name} }

// testName is the name of a subtest for the recorded file name.
func testName(file string) string { return strings.TrimSuffix(file, ".sse") }

// providerError returns err as a *provider.Error, failing t if it is not one.
func providerError(t *testing.T, err error) *provider.Error {
	t.Helper()
	pe, ok := errors.AsType[*provider.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a provider error", err, err)
	}
	return pe
}
