package ratelimit

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// Distribution counters (docs/rollout.md, "The distribution"): for every
// fixed_window rule, how many subject-windows (one user's, school's or
// address's window) went past each of DistributionThresholds. A
// subject-window goes past threshold t when its count reaches t+1: the
// request that a limit of t would have been the first to refuse. The
// counters are in-process atomics, incremented from the counts the
// limiter already gets back (the hit script's reply, or the sync round's
// merged state: no extra store call), and taken by the telemetry Recorder
// at each flush (TakeDistribution), which writes them with its own batch.
//
// Past threshold 0 is every subject-window that counted at least one hit:
// the denominator of the blocked share. GCRA and sliding_window rules have
// none: their stores count only the hits that pass, so nothing above the
// limit is ever seen.

// DistributionThresholds are the thresholds counted, ascending: 0, every
// integer to 10, then 15 per decade (10 12 15 18 20 25 30 35 40 45 50 60
// 70 80 90) up to 1 000 000. Two consecutive ones differ by at most 25 %
// from 10 on, so the smallest threshold that blocks at most a share of
// subject-windows is within 25 % of the exact limit that does.
var DistributionThresholds = distributionThresholds()

func distributionThresholds() []int64 {
	out := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	steps := []int64{10, 12, 15, 18, 20, 25, 30, 35, 40, 45, 50, 60, 70, 80, 90}
	for scale := int64(1); scale <= 10000; scale *= 10 {
		for _, s := range steps {
			out = append(out, s*scale)
		}
	}
	return append(out, 1000000)
}

// smallThreshold maps n (≤ smallMax) to its index in DistributionThresholds
// or -1: the hot path's lookup without a search.
const smallMax = 1000

var smallThreshold = func() [smallMax + 1]int16 {
	var t [smallMax + 1]int16
	for i := range t {
		t[i] = -1
	}
	for i, v := range DistributionThresholds {
		if v <= smallMax {
			t[v] = int16(i)
		}
	}
	return t
}()

// thresholdIndex returns the index of n in DistributionThresholds, or -1.
func thresholdIndex(n int64) int {
	if n < 0 {
		return -1
	}
	if n <= smallMax {
		return int(smallThreshold[n])
	}
	if i, ok := slices.BinarySearch(DistributionThresholds, n); ok {
		return i
	}
	return -1
}

// distribution is one rule's counters, one per threshold.
type distribution struct {
	past [len(distThresholdsShape)]atomic.Int64
}

// distThresholdsShape sizes distribution.past at compile time; init checks
// it matches DistributionThresholds.
var distThresholdsShape [10 + 15*5 + 1]struct{}

func init() {
	if len(distThresholdsShape) != len(DistributionThresholds) {
		panic("ratelimit: distThresholdsShape does not match DistributionThresholds")
	}
}

// countPast counts the thresholds a subject-window's count went past when
// it grew from before to after (before < after): every t with
// before ≤ t < after.
func (d *distribution) countPast(before, after int64) {
	if d == nil || after <= before {
		return
	}
	before = max(before, 0)
	if after-before == 1 { // the per-request case: one hit
		if i := thresholdIndex(before); i >= 0 {
			d.past[i].Add(1)
		}
		return
	}
	i := sort.Search(len(DistributionThresholds), func(i int) bool { return DistributionThresholds[i] >= before })
	for ; i < len(DistributionThresholds) && DistributionThresholds[i] < after; i++ {
		d.past[i].Add(1)
	}
}

// distributions holds the Limiter's counters by rule name; it outlives a
// Reload, so counts not yet taken are kept and a rule keeps its counters.
type distributions struct {
	mu     sync.Mutex
	byRule map[string]*distribution
}

// attach gives every fixed_window rule of rs its counters.
func (ds *distributions) attach(rs *ruleset) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.byRule == nil {
		ds.byRule = map[string]*distribution{}
	}
	for _, r := range rs.rules {
		if r.algorithm != FixedWindow {
			continue
		}
		d, ok := ds.byRule[r.name]
		if !ok {
			d = &distribution{}
			ds.byRule[r.name] = d
		}
		r.dist = d
	}
}

// DistributionCount is one counter taken by TakeDistribution: Past
// subject-windows of Rule went past threshold At since the last take.
type DistributionCount struct {
	Rule string
	At   int64
	Past int64
}

// TakeDistribution returns the distribution counts since the last call
// and zeroes them (the telemetry Recorder calls it at each flush; a
// failed write loses them as it loses the batch's events). Safe for
// concurrent use with Decide.
func (l *Limiter) TakeDistribution() []DistributionCount {
	ds := &l.dists
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []DistributionCount
	for name, d := range ds.byRule {
		for i := range d.past {
			if n := d.past[i].Swap(0); n > 0 {
				out = append(out, DistributionCount{Rule: name, At: DistributionThresholds[i], Past: n})
			}
		}
	}
	return out
}

// observeHits counts the thresholds the hits' counts went past, from the
// store's replies (one hit each: a counted hit grew its count by one).
func observeHits(hits []Hit, counts []Count) {
	for j := range hits {
		if h := &hits[j]; h.dist != nil && h.Algorithm == FixedWindow && counts[j].Counted {
			h.dist.countPast(counts[j].N-1, counts[j].N)
		}
	}
}

// observeSync counts the thresholds a sync exchange's keys went past in
// the store: a fixed-window key grew from got − (local − base) to got
// (the script adds what this replica counted since it last read the key
// to what the store holds). The script is atomic, so what several
// replicas add is counted once, by the replica whose merge crossed it.
func observeSync(ops []SyncOp, got []KeyState) {
	for i := range ops {
		op := &ops[i]
		if op.Hit.dist == nil || op.Hit.Algorithm != FixedWindow || !got[i].present() {
			continue
		}
		// What this op added: the view's count since its read, and a
		// lease the store reserved for it (SyncOp.LeaseAmong), counted
		// when it is granted (its passes are not sent again).
		added := op.Local.N
		if op.Base.present() {
			added -= op.Base.N
		}
		added = max(0, added) + got[i].Leased
		if added > 0 {
			op.Hit.dist.countPast(got[i].N-added, got[i].N)
		}
	}
}
