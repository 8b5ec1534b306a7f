package anthropic

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2/config"
)

// errNoAPIKey is New's error when no credential is to be had: without one the API
// refuses every call, and a call would still go out first.
var errNoAPIKey = errors.New("anthropic: no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, or ANTHROPIC_PROFILE for a profile of Anthropic's CLI), or ANTHROPIC_BASE_URL for a server that needs none")

// checkCredentialChain reports whether the SDK's credential chain, which a client is
// left to when neither Config.APIKey nor ANTHROPIC_API_KEY is set, finds a credential:
// ANTHROPIC_AUTH_TOKEN, the profile ANTHROPIC_PROFILE names, federation through
// ANTHROPIC_FEDERATION_RULE_ID, ANTHROPIC_ORGANIZATION_ID and an identity token, or the
// active profile on disk. It reads what the chain reads, in its order, and makes no
// request: the SDK's own check for a missing credential gives way to any middleware,
// and the Model always has one (the idle timeout), so the first call would go out
// without a key and fail on whatever the network said.
func checkCredentialChain() error {
	if os.Getenv("ANTHROPIC_AUTH_TOKEN") != "" {
		return nil
	}
	if profile := os.Getenv("ANTHROPIC_PROFILE"); profile != "" {
		if _, err := config.LoadProfile(config.DefaultDir(), profile); err != nil {
			return fmt.Errorf("anthropic: ANTHROPIC_PROFILE=%q: %w", profile, err)
		}
		return nil
	}
	// Set, even empty, counts for the rule and the organization, as the SDK counts them.
	_, rule := os.LookupEnv("ANTHROPIC_FEDERATION_RULE_ID")
	_, org := os.LookupEnv("ANTHROPIC_ORGANIZATION_ID")
	token := os.Getenv("ANTHROPIC_IDENTITY_TOKEN_FILE") != "" || os.Getenv("ANTHROPIC_IDENTITY_TOKEN") != ""
	if rule && org && token {
		return nil
	}
	if _, err := config.LoadConfig(); err == nil {
		return nil
	}
	if rule || org || token {
		var missing []string
		if !rule {
			missing = append(missing, "ANTHROPIC_FEDERATION_RULE_ID")
		}
		if !org {
			missing = append(missing, "ANTHROPIC_ORGANIZATION_ID")
		}
		if !token {
			missing = append(missing, "ANTHROPIC_IDENTITY_TOKEN_FILE (or ANTHROPIC_IDENTITY_TOKEN)")
		}
		return fmt.Errorf("%w; federation is set up in part, without %s", errNoAPIKey, strings.Join(missing, ", "))
	}
	return errNoAPIKey
}
