package runs

import (
	"context"
	"sync"
	"time"

	"github.com/agentd/agentd/service/runs/journal"
)

// Streams attached here to a run going on elsewhere (another replica holds it, or it
// ran here and was let go) read its events from the store, through a journal that
// follows the run (storedJournal, journal.follow). The journal keeps what it read in
// memory for all its streams; once they have read it all, it asks follows for more.

// followGap is the least time between two reads of followed runs from the store: the
// store's word that runs changed comes with nearly every event of a run that streams,
// and the changes of that time are read together, in one statement for all the runs.
const followGap = 10 * time.Millisecond

// followBatch bounds the frames one read takes of a run: a run that has more is read
// again at once.
const followBatch = 256

// storePollInterval is how often a run followed from the store is read when the store
// says nothing of it: a change it did not hear of is read that late at worst.
const storePollInterval = time.Second

// follows reads for the journals that follow runs from the store the frames their runs
// add: a journal whose readers have read all it has wants more (want), and the runs
// wanted are read in one ReadNewEvents, those the store says changed at once (at most
// one read every followGap), the others every storePollInterval. Each read wakes the
// journals that wanted it, with frames or without, and they want again while a reader
// waits: a run nobody reads any more is read no more. One goroutine reads, while any
// run is wanted.
type follows struct {
	s *Manager

	mu      sync.Mutex
	runs    map[string]*followedRun
	kick    chan struct{}
	running bool
}

// followedRun is a followed run's state.
type followedRun struct {
	wanting map[*journal.Journal]struct{}
	changed bool      // the store said it changed since it was last read
	read    time.Time // when it was last read; zero for never
}

func newFollows(s *Manager) *follows {
	return &follows{s: s, runs: map[string]*followedRun{}, kick: make(chan struct{}, 1)}
}

// poll returns the poll of a journal following run id.
func (f *follows) poll(id string) func(*journal.Journal) {
	return func(j *journal.Journal) { f.want(id, j) }
}

// want records that j, following run id, has been read to its end and waits for more.
// Called with j.mu held.
func (f *follows) want(id string, j *journal.Journal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fr := f.runs[id]
	if fr == nil {
		fr = &followedRun{wanting: map[*journal.Journal]struct{}{}}
		f.runs[id] = fr
	}
	fr.wanting[j] = struct{}{}
	if fr.changed || fr.read.IsZero() {
		notify(f.kick)
	}
	if !f.running {
		f.running = true
		go f.run()
	}
}

// changed is the store's word that runs ids changed (nil: any may have).
func (f *follows) changed(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hit := false
	if ids == nil {
		for _, fr := range f.runs {
			fr.changed, hit = true, true
		}
	}
	for _, id := range ids {
		if fr := f.runs[id]; fr != nil {
			fr.changed, hit = true, true
		}
	}
	if hit {
		notify(f.kick)
	}
}

// run reads the runs wanted until none is.
func (f *follows) run() {
	var last, failing time.Time
	failures := 0
	for {
		if wait := followGap - time.Since(last); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Now()
		due := map[string]int64{}
		next := now.Add(storePollInterval)
		f.mu.Lock()
		for id, fr := range f.runs {
			if len(fr.wanting) == 0 {
				delete(f.runs, id)
				continue
			}
			if at := fr.read.Add(storePollInterval); fr.changed || !at.After(now) {
				cursor := int64(-1)
				for j := range fr.wanting {
					if l := j.Last(); cursor < 0 || l < cursor {
						cursor = l
					}
				}
				due[id] = cursor
				fr.changed = false
			} else if at.Before(next) {
				next = at
			}
		}
		if len(f.runs) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		if len(due) == 0 {
			t := time.NewTimer(time.Until(next))
			select {
			case <-f.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), journal.StoreTimeout)
		got, err := f.s.store.ReadNewEvents(ctx, due, followBatch)
		cancel()
		if err != nil {
			if failures++; failures == 1 {
				failing = last
				f.s.log.Warn("reading the runs followed from the store failed", "runs", len(due), "error", err)
			}
			// Tried again after a while, the journals waiting on, their streams getting
			// heartbeats; past a lease, as a run this server holds would be let go, the
			// streams end, to attach again where the store may answer.
			giveUp := time.Since(failing) >= f.s.cfg.LeaseTTL
			// A run is read again storePollInterval after it was read: set as read that
			// long before the retry is due, backing off to a second.
			retry := min(time.Duration(failures)*followGap*10, time.Second)
			asRead := time.Now().Add(retry - storePollInterval)
			var lost []*journal.Journal
			f.mu.Lock()
			for id := range due {
				fr := f.runs[id]
				if fr == nil {
					continue
				}
				fr.read = asRead
				if giveUp {
					for j := range fr.wanting {
						lost = append(lost, j)
					}
					clear(fr.wanting)
				}
			}
			f.mu.Unlock()
			for _, j := range lost {
				j.Lose(errStoreLost)
			}
			continue
		}
		failures = 0
		f.mu.Lock()
		var woken []*journal.Journal
		var after []int64
		var frames [][][]byte
		for id, cursor := range due {
			fr := f.runs[id]
			if fr == nil {
				continue
			}
			fr.read = last
			fs := got[id]
			if len(fs) == followBatch {
				fr.changed = true // more to read
			}
			for j := range fr.wanting {
				woken, after, frames = append(woken, j), append(after, cursor), append(frames, fs)
			}
			clear(fr.wanting)
		}
		f.mu.Unlock()
		for i, j := range woken {
			j.AddFetched(after[i], frames[i])
		}
	}
}

// notify wakes the one who waits on ch, if one does not yet have a wake-up queued.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
