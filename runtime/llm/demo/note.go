package demo

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime/tool/builtin"
)

// isNoteRequest reports whether s asks to save something.
func isNoteRequest(s string) bool {
	if hasWord(s, "note", "save", "remember", "memo", "jot", "remind") {
		return true
	}
	l := strings.ToLower(s)
	return strings.Contains(l, "don't forget") || strings.Contains(l, "do not forget") || strings.Contains(l, "write down")
}

// notePrefixRE matches the request around a note's text: "please save a note that",
// "remember to", "note down:", "can you jot this down:", "remind me to", "don't forget to".
var notePrefixRE = regexp.MustCompile(`(?i)^\s*(?:(?:hi|hey|ok|okay)\b[,!.]?\s*)?(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?` +
	`(?:save|take|make|write|add|create|store|keep|jot|remember(?:\s+to\b)?|note|remind\s+me(?:\s+to\b)?|(?:don't|dont|do\s+not)\s+forget(?:\s+to\b)?)\b` +
	`(?:\s+(?:down|for\s+me))?` +
	`(?:\s+(?:a|an|the|this|my|that))?` +
	`(?:\s+(?:new\s+)?(?:note|memo|reminder))?` +
	`(?:\s+(?:down|for\s+me))?` +
	`(?:\s+(?:that|saying|about|to\s+say))?` +
	`\s*[:,\-–—]?\s*`)

// maxTitle is the length of a title the demo derives, in characters; it is well within
// builtin.MaxTitleLen.
const maxTitle = 60

// noteFrom derives a note's title and text from a request to save one. Text after a colon
// is the note; otherwise the request's words are stripped from the front. The title is
// the text's first line, shortened at a word. An empty text means there is nothing to
// save.
func noteFrom(s string) (title, text string) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, ":"); i >= 0 && isNoteRequest(s[:i]) {
		text = s[i+1:]
	} else {
		text = s[len(notePrefixRE.FindString(s)):]
	}
	text = strings.TrimSpace(text)
	if text == "" || !strings.ContainsFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return "", ""
	}
	if r := []rune(text); len(r) > builtin.MaxTextLen {
		text = strings.TrimSpace(string(r[:builtin.MaxTextLen]))
	}
	title, _, _ = strings.Cut(text, "\n")
	title = strings.TrimRight(strings.TrimSpace(title), ".!?;,")
	title = shorten(title, maxTitle)
	if title == "" {
		title = "Note"
	}
	r, size := utf8.DecodeRuneInString(title)
	return string(unicode.ToUpper(r)) + title[size:], text
}

// shorten cuts s to at most n characters, at a space if there is one, marking the cut
// with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	cut := string(r[:n-1])
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:.") + "…"
}
