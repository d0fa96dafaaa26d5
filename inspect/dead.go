package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// actionChunk is how many dead letters one round trip of RequeueDead or PurgeDead handles.
const actionChunk = 1000

// Cursor components: a shard not started yet, and a shard scanned to its oldest letter.
const (
	cursorStart = ""
	cursorDone  = "x"
)

// DeadLetters returns one page of queue's dead letters, newest first, that pass q's filters,
// merged over the shards by time of death. Each call looks at no more than q.Window letters per
// shard, so a filtered page may be short or empty while Next says where to go on; an unfiltered
// page is full unless the letters run out. Its cost is O(shards · (log n + window)). It fails with
// engine.ErrInvalid for a malformed or foreign cursor, a limit above MaxLimit or a window above
// MaxDeadWindow, with engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) DeadLetters(ctx context.Context, queue string, q DeadQuery) (DeadPage, error) {
	scan, limit, err := deadScan(q)
	if err != nil {
		return DeadPage{}, err
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return DeadPage{}, err
	}
	at, err := parseCursor(q.Cursor, len(engs))
	if err != nil {
		return DeadPage{}, err
	}
	pages := make([]*engine.DeadScanPage, len(engs))
	total := make([]int64, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		s := scan
		s.Cursor = at[i]
		if s.Cursor == cursorDone {
			// Nothing left to look at; only the total is wanted.
			s.Cursor, s.Limit, s.Window, s.IDsOnly = "0", 1, 1, true
			p, err := e.ScanDead(ctx, s)
			total[i] = p.Total
			return err
		}
		p, err := e.ScanDead(ctx, s)
		pages[i] = &p
		total[i] = p.Total
		return err
	})
	if err != nil {
		return DeadPage{}, fmt.Errorf("inspect: dead letters of %q: %w", queue, err)
	}

	// Letters at or above the frontier, the highest score where a shard's look stopped short, are
	// safe to show: no unseen letter of any shard is newer than them.
	frontier := int64(-1)
	type cand struct {
		l     engine.ScannedLetter
		shard int
	}
	var cands []cand
	for i, p := range pages {
		if p == nil {
			continue
		}
		if p.Next != "" {
			n, _ := strconv.ParseInt(p.Next, 10, 64)
			frontier = max(frontier, n)
		}
		for _, l := range p.Letters {
			cands = append(cands, cand{l, i})
		}
	}
	cands = slices.DeleteFunc(cands, func(c cand) bool { return c.l.Score < frontier })
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(b.l.Score, a.l.Score), cmp.Compare(a.shard, b.shard)) })
	cands = cands[:min(len(cands), limit)]

	out := DeadPage{Letters: make([]DeadLetter, 0, len(cands))}
	included := make([]int, len(engs))
	lastScore := make([]int64, len(engs))
	for _, c := range cands {
		out.Letters = append(out.Letters, deadLetterOf(c.l, c.shard))
		included[c.shard]++
		lastScore[c.shard] = c.l.Score
	}
	next := make([]string, len(engs))
	for i, p := range pages {
		switch {
		case p == nil:
			next[i] = cursorDone
		case included[i] == len(p.Letters):
			next[i] = cmp.Or(p.Next, cursorDone)
		case included[i] > 0:
			next[i] = strconv.FormatInt(lastScore[i], 10)
		default:
			next[i] = at[i]
		}
	}
	for _, t := range total {
		out.Total += t
	}
	out.Next = formatCursor(next)
	return out, nil
}

// deadScan checks q and returns the engine scan it asks for and its page size.
func deadScan(q DeadQuery) (engine.DeadScan, int, error) {
	limit := cmp.Or(q.Limit, DefaultPageLimit)
	if limit < 1 || limit > MaxLimit {
		return engine.DeadScan{}, 0, fmt.Errorf("inspect: %w: dead-letter limit %d is outside [1, %d]", engine.ErrInvalid, limit, MaxLimit)
	}
	if q.BasePartition && q.Partition != "" {
		return engine.DeadScan{}, 0, fmt.Errorf("inspect: %w: BasePartition with partition %q", engine.ErrInvalid, q.Partition)
	}
	s := engine.DeadScan{Limit: limit, Window: limit, ErrorContains: q.ErrorContains}
	if q.Partition != "" || q.BasePartition {
		s.ByPartition, s.Partition = true, partition.Key(q.Partition)
		if err := s.Partition.Validate(); err != nil {
			return engine.DeadScan{}, 0, fmt.Errorf("inspect: %w: %w", engine.ErrInvalid, err)
		}
	}
	if s.ByPartition || s.ErrorContains != "" {
		// A filter looks at the window's letters and no more, so a window below the page size
		// gives a page of at most the window's letters (the engine's scan keeps its Limit within
		// its Window).
		s.Window = cmp.Or(q.Window, DefaultDeadWindow)
		s.Limit = min(limit, s.Window)
	}
	if q.Window < 0 || s.Window > MaxDeadWindow {
		return engine.DeadScan{}, 0, fmt.Errorf("inspect: %w: dead-letter window %d is outside [0, %d]", engine.ErrInvalid, q.Window, MaxDeadWindow)
	}
	return s, limit, nil
}

// A cursor is "<shards>:<component>,<component>…": per shard, empty (not started), "x" (done) or
// the dead score to continue below.
func formatCursor(comps []string) string {
	if !slices.ContainsFunc(comps, func(c string) bool { return c != cursorDone }) {
		return ""
	}
	return strconv.Itoa(len(comps)) + ":" + strings.Join(comps, ",")
}

func parseCursor(c string, shards int) ([]string, error) {
	if c == "" {
		return make([]string, shards), nil
	}
	bad := func(why string) error {
		return fmt.Errorf("inspect: %w: dead-letter cursor %q %s; start again with an empty cursor", engine.ErrInvalid, c, why)
	}
	n, rest, ok := strings.Cut(c, ":")
	if !ok {
		return nil, bad("is malformed")
	}
	if count, err := strconv.Atoi(n); err != nil || count != shards {
		return nil, bad(fmt.Sprintf("is not for a queue of %d shards", shards))
	}
	comps := strings.Split(rest, ",")
	if len(comps) != shards {
		return nil, bad("is malformed")
	}
	for _, comp := range comps {
		if comp == cursorStart || comp == cursorDone {
			continue
		}
		if v, err := strconv.ParseInt(comp, 10, 64); err != nil || v < 0 {
			return nil, bad("is malformed")
		}
	}
	return comps, nil
}

func deadLetterOf(l engine.ScannedLetter, shard int) DeadLetter {
	return DeadLetter{ID: l.ID, Shard: shard, Partition: l.Partition, Priority: l.Priority, Attempts: l.Attempts,
		MaxAttempts: l.MaxAttempts, Crashes: l.Crashes, Error: l.LastError, DiedAt: l.DiedAt,
		EnqueuedAt: l.EnqueuedAt, Payload: l.Payload, Headers: l.Headers}
}

// RequeueDead moves the dead letters sel names back to pending, as if newly published (behind the
// work pending in their partition, attempts reset, last error kept), and returns how many it
// moved. Ids that are not dead letters are skipped. Filter and All go through the letters a
// bounded chunk per round trip, newest first; letters that die while it runs are not touched.
// It fails with engine.ErrInvalid unless sel names exactly one of IDs, Filter and All (or for an
// invalid id or filter), with engine.ErrNotFound for an unknown queue, and with Redis's error or
// ctx's, returning what it moved so far.
func (in *Inspector) RequeueDead(ctx context.Context, queue string, sel DeadSelector) (int, error) {
	return in.onDead(ctx, queue, sel, "requeue", func(ctx context.Context, e *engine.Engine, ids []string) (int, error) {
		errs, err := e.Requeue(ctx, ids)
		n := 0
		for _, err := range errs {
			if err == nil {
				n++
			}
		}
		return n, err
	}, nil)
}

// PurgeDead deletes the dead letters sel names and returns how many it deleted. It fails as
// RequeueDead does.
func (in *Inspector) PurgeDead(ctx context.Context, queue string, sel DeadSelector) (int, error) {
	return in.onDead(ctx, queue, sel, "purge", func(ctx context.Context, e *engine.Engine, ids []string) (int, error) {
		return e.Purge(ctx, ids)
	}, (*engine.Engine).PurgeAll)
}

func (in *Inspector) onDead(ctx context.Context, queue string, sel DeadSelector, what string,
	act func(context.Context, *engine.Engine, []string) (int, error),
	all func(*engine.Engine, context.Context) (int, error)) (int, error) {
	chosen := 0
	for _, b := range []bool{len(sel.IDs) > 0, sel.Filter != nil, sel.All} {
		if b {
			chosen++
		}
	}
	if chosen != 1 {
		return 0, fmt.Errorf("inspect: %w: name exactly one of IDs, Filter and All to %s dead letters", engine.ErrInvalid, what)
	}
	var scan engine.DeadScan
	if sel.Filter != nil {
		q := *sel.Filter
		q.Cursor, q.Limit, q.Window = "", 0, 0
		var err error
		if scan, _, err = deadScan(q); err != nil {
			return 0, err
		}
	}
	// Actions move ids only, so they go through bigger chunks than a page.
	scan.Limit, scan.Window = actionChunk, actionChunk
	scan.IDsOnly = true
	engs, err := in.writers(ctx, queue)
	if err != nil {
		return 0, err
	}
	counts := make([]int, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		if len(sel.IDs) > 0 {
			n, err := act(ctx, e, sel.IDs)
			counts[i] = n
			return err
		}
		if sel.All && all != nil {
			n, err := all(e, ctx)
			counts[i] = n
			return err
		}
		s := scan
		for {
			page, err := e.ScanDead(ctx, s)
			if err != nil {
				return err
			}
			ids := make([]string, len(page.Letters))
			for j, l := range page.Letters {
				ids[j] = l.ID
			}
			if len(ids) > 0 {
				n, err := act(ctx, e, ids)
				counts[i] += n
				if err != nil {
					return err
				}
			}
			if page.Next == "" {
				return nil
			}
			s.Cursor = page.Next
		}
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	if err != nil {
		return n, fmt.Errorf("inspect: %s dead letters of %q: %w", what, queue, err)
	}
	return n, nil
}
