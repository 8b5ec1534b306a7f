package continuation

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinKeySize is the shortest signing key accepted: 256 bits, the strength HMAC-SHA256
// offers.
const MinKeySize = 32

// Key returns the key continuations are signed with. value (the environment's
// AGENTD_CONTINUATION_KEY) wins over file; a file's content is read whole, its trailing
// newlines trimmed. Either is taken as a raw key of at least 32 bytes, or as
// "base64:<standard base64>" or "hex:<hex>" decoding to at least 32 bytes. With neither,
// the key is 32 random bytes and random is true: continuations then open on this process
// only, not on another replica, nor after a restart.
//
// Errors never quote the key.
func Key(value, file string) (key []byte, random bool, err error) {
	switch {
	case value != "":
		key, err = parseKey(value)
		if err != nil {
			return nil, false, fmt.Errorf("continuation key (AGENTD_CONTINUATION_KEY): %w", err)
		}
		return key, false, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, false, fmt.Errorf("continuation key file: %w", err)
		}
		key, err = parseKey(strings.TrimRight(string(b), "\r\n"))
		if err != nil {
			return nil, false, fmt.Errorf("continuation key file %s: %w", file, err)
		}
		return key, false, nil
	}
	key = make([]byte, MinKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, false, fmt.Errorf("continuation key: %w", err)
	}
	return key, true, nil
}

func parseKey(s string) ([]byte, error) {
	const hint = "generate one with: echo base64:$(openssl rand -base64 32)"
	var key []byte
	switch {
	case s == "":
		return nil, fmt.Errorf("empty; %s", hint)
	case strings.HasPrefix(s, "base64:"):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "base64:"))
		if err != nil {
			// The error gives an offset, never the key's bytes.
			return nil, fmt.Errorf("base64: key is not valid standard base64: %v", err)
		}
		key = b
	case strings.HasPrefix(s, "hex:"):
		b, err := hex.DecodeString(strings.TrimPrefix(s, "hex:"))
		if err != nil {
			// hex's error would quote a byte of the key.
			return nil, errors.New("hex: key is not valid hex (an even number of 0-9, a-f)")
		}
		key = b
	default:
		key = []byte(s)
	}
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("key is %d bytes, want at least %d; %s", len(key), MinKeySize, hint)
	}
	return key, nil
}
