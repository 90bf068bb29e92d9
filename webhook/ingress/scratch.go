package ingress

import "sync"

// scratchKeep is the largest buffer a scratch keeps for the next event:
// a 10 MB event's buffers are let go, not pinned in the pool.
const scratchKeep = 64 << 10

// scratch holds one event's two large buffers, the request body and the
// encoded envelope (about 1 KB and 1.5 KB for a typical WhatsApp event: a
// third of the bytes the ingress allocated per event,
// docs/performance.md). The ingress takes one per request and gives it
// back once the publisher has returned (the headers map too): publish.Publisher keeps no
// reference to a message body after Publish returns (the frames are
// copied to the socket's queue before it does).
type scratch struct {
	body, env []byte
	// headers are the envelope's headers (envelopeHeaders), cleared per
	// event: the envelope holds the map only while it is encoded.
	headers map[string]string
}

var scratches = sync.Pool{New: func() any {
	return &scratch{headers: make(map[string]string, len(envelopeHeaders))}
}}

func getScratch() *scratch { return scratches.Get().(*scratch) }

// put gives s back; body and env are the slices used for the event (they
// may have grown out of s's own), kept when small enough.
func (s *scratch) put(body, env []byte) {
	s.body, s.env = keep(body, s.body), keep(env, s.env)
	scratches.Put(s)
}

// keep returns used emptied when it is small enough to keep, else old.
func keep(used, old []byte) []byte {
	if cap(used) > 0 && cap(used) <= scratchKeep && cap(used) >= cap(old) {
		return used[:0]
	}
	if cap(old) > scratchKeep {
		return nil
	}
	return old[:0]
}
