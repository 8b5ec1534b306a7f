package builtin

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
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

// The bounds of a [Notes] store whose fields leave them unset.
const (
	// DefaultNoteLimit is how many notes one scope holds.
	DefaultNoteLimit = 100
	// DefaultNoteScopes is how many scopes a store holds.
	DefaultNoteScopes = 1000
	// DefaultNoteBytes is how many bytes of titles, texts, callers and thread IDs a store
	// holds in all its scopes: 32 MiB.
	DefaultNoteBytes = 32 << 20
)

// ErrNotesFull is wrapped by the error of a save to a scope that holds as many notes as
// it may.
var ErrNotesFull = errors.New("no room for another note")

// Note is a saved note.
type Note struct {
	// ID is "note_1", "note_2" and so on, in the order its scope saved them.
	ID    string
	Title string
	Text  string
	// Saved is when the note was saved, by the tool's clock.
	Saved time.Time
	// Scope is whose note it is.
	Scope NoteScope
}

// NoteScope says whose notes are kept together: those of one caller in one thread. The
// notes of one scope never mix with another's, and one scope's notes count against its
// own limit alone.
type NoteScope struct {
	// Caller is the caller of the runs that saved the notes ([runtime.RunInfo].Caller),
	// empty for runs whose caller is unknown: their notes are kept by thread alone.
	Caller string
	// ThreadID is the thread of the runs that saved the notes.
	ThreadID string
}

// NoteScopeFromContext returns the scope of the run ctx belongs to (see
// [runtime.RunInfoFromContext]): its caller and its thread. Outside a run it returns the
// zero NoteScope, the one scope of every save made outside a run (the runtime gives every
// run a thread, so no run shares it).
func NoteScopeFromContext(ctx context.Context) NoteScope {
	info := runtime.RunInfoFromContext(ctx)
	if info == nil {
		return NoteScope{}
	}
	return NoteScope{Caller: info.Caller, ThreadID: info.ThreadID}
}

// Notes is an in-memory store of notes, kept apart by [NoteScope] and bounded, so that a
// model can neither fill the server's memory nor keep another caller from saving.
//
// Each scope holds up to Limit notes; a save beyond that fails with [ErrNotesFull] for
// that scope alone. The store holds up to MaxScopes scopes and MaxBytes bytes of titles,
// texts, callers and thread IDs in all: a save that would pass either bound first drops
// the scopes saved to least recently, with their notes, so a save that fits its own scope
// always succeeds. With the defaults a store holds at most 32 MiB of text, plus about 150
// bytes of bookkeeping for each of at most 100,000 notes and 1,000 scopes. Notes live as
// long as the store: a restart loses them.
//
// The zero value is an empty store with the default bounds. Set the fields before the
// store's first use; they must not change after it. A Notes is safe for concurrent use and
// must not be copied after first use.
type Notes struct {
	// Limit bounds the notes of one scope; 0 or less means [DefaultNoteLimit].
	Limit int
	// MaxScopes bounds the scopes held; 0 or less means [DefaultNoteScopes].
	MaxScopes int
	// MaxBytes bounds the bytes of titles, texts, callers and thread IDs held; 0 or less
	// means [DefaultNoteBytes].
	MaxBytes int64

	mu     sync.Mutex
	scopes map[NoteScope]*list.Element // each holding a *noteScope
	recent list.List                   // the scopes, saved to most recently first
	bytes  int64                       // held, as MaxBytes counts them
	saves  uint64                      // saves so far, to list notes in order
}

// noteScope holds the notes of one scope.
type noteScope struct {
	key   NoteScope
	notes []savedNote
	last  int   // the number of the last ID given
	bytes int64 // of the notes and the key, as MaxBytes counts them
}

type savedNote struct {
	Note
	seq uint64 // Notes.saves when it was saved
}

// NewNotes returns an empty store holding up to limit notes in each scope, with the
// default bounds otherwise; limit <= 0 means [DefaultNoteLimit].
func NewNotes(limit int) *Notes { return &Notes{Limit: limit} }

// Add saves a note in the zero [NoteScope], that of saves made outside a run, as
// [Notes.AddIn] does.
func (n *Notes) Add(title, text string, saved time.Time) (Note, error) {
	return n.AddIn(NoteScope{}, title, text, saved)
}

// AddIn saves a note in scope and returns it with its ID. Title and text are stored
// without surrounding spaces; each must keep at least one character, and at most
// [MaxTitleLen] and [MaxTextLen]. A scope that holds Limit notes returns an error
// wrapping [ErrNotesFull]; to make room for a note, AddIn drops the scopes saved to least
// recently, never scope itself.
func (n *Notes) AddIn(scope NoteScope, title, text string, saved time.Time) (Note, error) {
	title, text = strings.TrimSpace(title), strings.TrimSpace(text)
	if err := checkLen("title", title, MaxTitleLen); err != nil {
		return Note{}, err
	}
	if err := checkLen("text", text, MaxTextLen); err != nil {
		return Note{}, err
	}
	size := int64(len(title) + len(text))
	limit := cmp.Or(max(n.Limit, 0), DefaultNoteLimit)
	maxScopes := cmp.Or(max(n.MaxScopes, 0), DefaultNoteScopes)
	maxBytes := cmp.Or(max(n.MaxBytes, 0), DefaultNoteBytes)

	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.scopes[scope]
	if e == nil {
		for len(n.scopes) >= maxScopes {
			n.dropOldest()
		}
		if n.scopes == nil {
			n.scopes = make(map[NoteScope]*list.Element)
		}
		s := &noteScope{key: scope, bytes: int64(len(scope.Caller) + len(scope.ThreadID))}
		e = n.recent.PushFront(s)
		n.scopes[scope] = e
		n.bytes += s.bytes
	}
	s := e.Value.(*noteScope)
	if len(s.notes) >= limit {
		return Note{}, fmt.Errorf("%w: this conversation has %d notes, as many as it may keep", ErrNotesFull, limit)
	}
	n.recent.MoveToFront(e)
	for n.bytes+size > maxBytes && n.recent.Back() != e {
		n.dropOldest()
	}
	if n.bytes+size > maxBytes {
		return Note{}, fmt.Errorf("%w: the notes of this conversation fill the store", ErrNotesFull)
	}
	s.last++
	n.saves++
	note := Note{ID: "note_" + strconv.Itoa(s.last), Title: title, Text: text, Saved: saved, Scope: scope}
	s.notes = append(s.notes, savedNote{Note: note, seq: n.saves})
	s.bytes += size
	n.bytes += size
	return note, nil
}

// dropOldest drops the scope saved to least recently. n.mu is held.
func (n *Notes) dropOldest() {
	e := n.recent.Back()
	s := e.Value.(*noteScope)
	n.recent.Remove(e)
	delete(n.scopes, s.key)
	n.bytes -= s.bytes
}

// List returns a copy of the notes of every scope, oldest first.
func (n *Notes) List() []Note {
	n.mu.Lock()
	var all []savedNote
	for e := n.recent.Front(); e != nil; e = e.Next() {
		all = append(all, e.Value.(*noteScope).notes...)
	}
	n.mu.Unlock()
	slices.SortFunc(all, func(a, b savedNote) int { return cmp.Compare(a.seq, b.seq) })
	notes := make([]Note, len(all))
	for i, s := range all {
		notes[i] = s.Note
	}
	return notes
}

// ListIn returns a copy of the notes of scope, oldest first. Listing is no save: it
// does not keep the scope from being dropped.
func (n *Notes) ListIn(scope NoteScope) []Note {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.scopes[scope]
	if e == nil {
		return nil
	}
	s := e.Value.(*noteScope)
	notes := make([]Note, len(s.notes))
	for i, sn := range s.notes {
		notes[i] = sn.Note
	}
	return notes
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

// SaveNote returns the save_note tool, which saves notes in notes, in the scope of the
// run that calls it ([NoteScopeFromContext]): a caller's notes in one thread are kept
// apart from every other caller's and thread's, and count against that scope's limit
// alone. Its arguments are {"title": text, "text": text}; its output is a
// [SaveNoteResult]. [WithClock] sets the time notes are saved at; other options are
// ignored. SaveNote panics if notes is nil.
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
	return runtime.NewTool(spec, func(ctx context.Context, call runtime.ToolCall) (runtime.Output, error) {
		var args struct {
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		if err := decodeArgs(call.Arguments, &args); err != nil {
			return runtime.Output{}, err
		}
		note, err := notes.AddIn(NoteScopeFromContext(ctx), args.Title, args.Text, now())
		if err != nil {
			return runtime.Output{}, err
		}
		return jsonOutput(SaveNoteResult{Saved: true, ID: note.ID, Title: note.Title})
	})
}
