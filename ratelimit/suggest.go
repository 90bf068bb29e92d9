package ratelimit

import "slices"

// Distribution is a rule's distribution over a period: for each
// threshold, how many subject-windows went past it (the sums of the
// distribution counters, TakeDistribution; gateway_metrics kind
// distribution). Past[0] is every subject-window that counted a hit.
type Distribution struct {
	Past map[int64]int64
}

// SubjectWindows is the number of subject-windows observed (past 0).
func (d Distribution) SubjectWindows() int64 { return d.Past[0] }

// ThresholdShare is one threshold and the share of subject-windows a
// limit equal to it would have blocked (went past it).
type ThresholdShare struct {
	At           int64   `json:"at"`
	Past         int64   `json:"subject_windows_past"`
	BlockedShare float64 `json:"blocked_share"`
}

// Shares returns, for every threshold ≥ 1 of DistributionThresholds up to
// the first that no subject-window went past (included), the share a
// limit equal to it would have blocked. Empty when nothing was observed.
func (d Distribution) Shares() []ThresholdShare {
	total := d.SubjectWindows()
	if total <= 0 {
		return nil
	}
	var out []ThresholdShare
	for _, at := range DistributionThresholds[1:] {
		p := min(d.Past[at], total)
		out = append(out, ThresholdShare{At: at, Past: p, BlockedShare: float64(p) / float64(total)})
		if p == 0 {
			break
		}
	}
	return out
}

// BlockedShare returns the share of subject-windows a limit of limit
// would have blocked, read at the largest threshold ≤ limit: exact when
// limit is a threshold, else an upper bound (a smaller limit blocks at
// least as many); at is that threshold. 0, 0 when nothing was observed.
func (d Distribution) BlockedShare(limit int64) (share float64, at int64) {
	total := d.SubjectWindows()
	if total <= 0 || limit < 1 {
		return 0, 0
	}
	i, found := slices.BinarySearch(DistributionThresholds, limit)
	if !found {
		i--
	}
	at = DistributionThresholds[i]
	return float64(min(d.Past[at], total)) / float64(total), at
}

// Suggest returns the smallest threshold ≥ 1 at which at most maxShare
// of the subject-windows would have been blocked; ok is false when
// nothing was observed or every threshold blocks more (the counts passed
// the largest threshold).
func (d Distribution) Suggest(maxShare float64) (limit int64, ok bool) {
	total := d.SubjectWindows()
	if total <= 0 {
		return 0, false
	}
	for _, at := range DistributionThresholds[1:] {
		if float64(min(d.Past[at], total)) <= maxShare*float64(total) {
			return at, true
		}
	}
	return 0, false
}
