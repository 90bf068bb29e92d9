package deadletter

import (
	"errors"
	"testing"
)

// TestSummarySaysTheDepthAndHowManyAreShown: the last line of `dlq list`
// never reports the rows shown as the queue's depth.
func TestSummarySaysTheDepthAndHowManyAreShown(t *testing.T) {
	for _, tc := range []struct {
		shown, inQueue, limit int
		err                   error
		want                  string
	}{
		{2, 2, 1000, nil, "2 dead letter(s) in q"},
		{3, 2, 1000, nil, "3 dead letter(s) in q"}, // one arrived during the pass
		{1, 2, 1, nil, "2 dead letter(s) in q, 1 shown (--limit 1)"},
		{0, 1, 0, nil, "1 dead letter(s) in q, none shown (--limit 0)"},
		{0, 0, 0, nil, "0 dead letter(s) in q"},
		{1, -1, 1, errors.New("404"), "1 dead letter(s) shown from q (--limit 1); the queue's depth is unknown: 404"},
	} {
		if got := Summary("q", tc.shown, tc.inQueue, tc.limit, tc.err); got != tc.want {
			t.Errorf("Summary(%d, %d, %d) = %q, want %q", tc.shown, tc.inQueue, tc.limit, got, tc.want)
		}
	}
}
