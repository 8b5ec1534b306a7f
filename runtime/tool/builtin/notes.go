package builtin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/runtime"
)

// Limits of a note, in characters.
const (
	MaxTitleLen = 200
	MaxTextLen  = 10000
)

// DefaultNoteLimit is how many notes a [Notes] store holds unless [NewNotes] says
// otherwise.
const DefaultNoteLimit = 1000

// ErrNotesFull is returned by [Notes.Add] when the store holds as many notes as it may.
var ErrNotesFull = errors.New("the note store is full")

// Note is a saved note.
type Note struct {
	// ID is "note_1", "note_2" and so on, in the order the store saved them.
	ID    string
	Title string
	Text  string
	// Saved is when the note was saved, by the tool's clock.
	Saved time.Time
}

// Notes is an in-memory store of notes, bounded so that a model cannot fill the server's
// memory. The zero value is an empty store holding up to [DefaultNoteLimit] notes. A
// Notes is safe for concurrent use and must not be copied after first use.
type Notes struct {
	mu    sync.Mutex
	limit int
	notes []Note
	next  int
}

// NewNotes returns an empty store holding up to limit notes; limit <= 0 means
// [DefaultNoteLimit].
func NewNotes(limit int) *Notes { return &Notes{limit: limit} }

// Add saves a note and returns it with its ID. Title and text are stored without
// surrounding spaces; each must keep at least one character, and at most [MaxTitleLen]
// and [MaxTextLen]. A full store returns an error wrapping [ErrNotesFull].
func (n *Notes) Add(title, text string, saved time.Time) (Note, error) {
	title, text = strings.TrimSpace(title), strings.TrimSpace(text)
	if err := checkLen("title", title, MaxTitleLen); err != nil {
		return Note{}, err
	}
	if err := checkLen("text", text, MaxTextLen); err != nil {
		return Note{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	limit := n.limit
	if limit <= 0 {
		limit = DefaultNoteLimit
	}
	if len(n.notes) >= limit {
		return Note{}, fmt.Errorf("%w (%d notes)", ErrNotesFull, limit)
	}
	n.next++
	note := Note{ID: "note_" + strconv.Itoa(n.next), Title: title, Text: text, Saved: saved}
	n.notes = append(n.notes, note)
	return note, nil
}

// List returns a copy of the saved notes, oldest first.
func (n *Notes) List() []Note {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Note(nil), n.notes...)
}

func checkLen(field, s string, limit int) error {
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return fmt.Errorf("the %s is empty", field)
	case n > limit:
		return fmt.Errorf("the %s has %d characters, more than %d", field, n, limit)
	}
	return nil
}

// The schema allows what Notes.Add accepts: "pattern" asks for one character that is not
// a space, since Add trims them.
const saveNoteSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "title": {
      "type": "string",
      "description": "A short title that says what the note is about, such as \"Shopping list\".",
      "minLength": 1,
      "maxLength": 200,
      "pattern": "\\S"
    },
    "text": {
      "type": "string",
      "description": "The full text of the note, in the user's words.",
      "minLength": 1,
      "maxLength": 10000,
      "pattern": "\\S"
    }
  },
  "required": ["title", "text"],
  "additionalProperties": false
}`

// SaveNoteResult is the JSON output of save_note.
type SaveNoteResult struct {
	// Saved is always true: a failed save is an error.
	Saved bool   `json:"saved"`
	ID    string `json:"id"`
	Title string `json:"title"`
}

// SaveNote returns the save_note tool, which saves notes in notes. Its arguments are
// {"title": text, "text": text}; its output is a [SaveNoteResult]. [WithClock] sets the
// time notes are saved at; other options are ignored. SaveNote panics if notes is nil.
//
// Saving is the one effect among the built-in tools: run it under [Policy], which asks for
// an approval.
func SaveNote(notes *Notes, opts ...Option) runtime.Tool {
	if notes == nil {
		panic("builtin: SaveNote needs a *Notes")
	}
	now := newOptions(opts).now
	spec := runtime.ToolSpec{
		Name: SaveNoteName,
		Description: "Saves a note for the user, with a short title and the full text. Call it when the " +
			"user asks you to save, note down or remember something; the user may be asked to approve the " +
			"call first. The result holds the note's id and title.",
		Parameters: []byte(saveNoteSchema),
		Parallel:   true,
	}
	return runtime.NewTool(spec, func(_ context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var args struct {
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := decodeArgs(call.Arguments, &args); err != nil {
			return runtime.Output{}, err
		}
		note, err := notes.Add(args.Title, args.Text, now())
		if err != nil {
			return runtime.Output{}, err
		}
		return jsonOutput(SaveNoteResult{Saved: true, ID: note.ID, Title: note.Title})
	})
}
