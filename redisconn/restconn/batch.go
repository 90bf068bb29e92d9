package restconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// errTxShape answers MULTI, EXEC and DISCARD when they do not frame the
// whole batch: /multi-exec takes a whole transaction in one request.
const errTxShape = "ERR restconn: MULTI … EXEC must be the whole batch (a go-redis TxPipeline) to travel as one /multi-exec request"

// exchange sends the batch cmds as one request (none when every command
// is answered locally) and returns one RESP reply per command, in order.
// An error is a failure of the whole exchange (transport, timeout, a reply
// of the wrong shape): the connection is then unusable.
func (c *Conn) exchange(ctx context.Context, cmds [][][]byte) ([]byte, error) {
	if n := len(cmds); n >= 2 && isCommand(cmds[0], "MULTI") && isCommand(cmds[n-1], "EXEC") {
		inner := cmds[1 : n-1]
		if !framesTx(inner) {
			return c.transaction(ctx, inner)
		}
	}
	if framesTx(cmds) {
		out := make([]byte, 0, 128*len(cmds))
		for range cmds {
			out = appendError(out, errTxShape)
		}
		return out, nil
	}
	return c.plain(ctx, cmds)
}

// framesTx reports whether cmds holds MULTI, EXEC or DISCARD.
func framesTx(cmds [][][]byte) bool {
	for _, cmd := range cmds {
		if isCommand(cmd, "MULTI") || isCommand(cmd, "EXEC") || isCommand(cmd, "DISCARD") {
			return true
		}
	}
	return false
}

// plain sends the commands REST can carry: one as POST /, several as
// POST /pipeline (each answered or failed on its own, as a RESP
// pipeline).
func (c *Conn) plain(ctx context.Context, cmds [][][]byte) ([]byte, error) {
	replies := make([][]byte, len(cmds))
	var remote []int
	for i, cmd := range cmds {
		if r, ok := localReply(cmd); ok {
			replies[i] = r
		} else {
			remote = append(remote, i)
		}
	}
	if len(remote) > 0 {
		var err error
		if len(remote) == 1 {
			err = c.single(ctx, cmds[remote[0]], &replies[remote[0]])
		} else {
			err = c.pipeline(ctx, cmds, remote, replies)
		}
		if err != nil {
			return nil, err
		}
	}
	var out []byte
	for _, r := range replies {
		out = append(out, r...)
	}
	return out, nil
}

// single sends one command (POST /).
func (c *Conn) single(ctx context.Context, cmd [][]byte, reply *[]byte) error {
	v, err := c.client.post(ctx, pathCommand, appendJSONCommand(nil, cmd))
	if msg, ok := refusal(err); ok {
		*reply = appendError(nil, msg)
		return nil
	}
	if err != nil {
		return err
	}
	*reply = appendValue(nil, v)
	return nil
}

// pipeline sends cmds[i] for every i of remote (POST /pipeline) and sets
// replies[i].
func (c *Conn) pipeline(ctx context.Context, cmds [][][]byte, remote []int, replies [][]byte) error {
	body := []byte{'['}
	for j, i := range remote {
		if j > 0 {
			body = append(body, ',')
		}
		body = appendJSONCommand(body, cmds[i])
	}
	body = append(body, ']')
	v, err := c.client.post(ctx, pathPipeline, body)
	if msg, ok := refusal(err); ok {
		for _, i := range remote {
			replies[i] = appendError(nil, msg)
		}
		return nil
	}
	if err != nil {
		return err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != len(remote) {
		return fmt.Errorf("upstash rest: /pipeline answered %T for %d commands", v, len(remote))
	}
	for j, i := range remote {
		replies[i] = appendValue(nil, arr[j])
	}
	return nil
}

// transaction sends inner (the commands between MULTI and EXEC) as POST
// /multi-exec and answers as Redis does: +OK to MULTI, +QUEUED to each
// command, then EXEC's array, or EXEC's error when the transaction failed
// as a whole. A command REST cannot carry aborts the transaction before
// any request, as a command Redis refuses to queue does (EXECABORT).
func (c *Conn) transaction(ctx context.Context, inner [][][]byte) ([]byte, error) {
	out := append(make([]byte, 0, 64+16*len(inner)), "+OK\r\n"...)
	aborted := false
	for _, cmd := range inner {
		if r, ok := localReply(cmd); ok {
			out = append(out, r...)
			aborted = true
		} else {
			out = append(out, "+QUEUED\r\n"...)
		}
	}
	if aborted {
		return appendError(out, "EXECABORT Transaction discarded because of previous errors."), nil
	}
	if len(inner) == 0 {
		return appendArrayHeader(out, 0), nil
	}
	body := []byte{'['}
	for j, cmd := range inner {
		if j > 0 {
			body = append(body, ',')
		}
		body = appendJSONCommand(body, cmd)
	}
	body = append(body, ']')
	v, err := c.client.post(ctx, pathMultiExec, body)
	if msg, ok := refusal(err); ok {
		return appendError(out, msg), nil
	}
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != len(inner) {
		return nil, fmt.Errorf("upstash rest: /multi-exec answered %T for %d commands", v, len(inner))
	}
	out = appendArrayHeader(out, len(arr))
	for _, e := range arr {
		out = appendValue(out, e)
	}
	return out, nil
}

// refusal turns a whole request's {"error": …} answer into the error
// reply of its commands: a 400 is the commands' own error (its text kept,
// so NOSCRIPT or WRONGTYPE still lead it); any other status (401 for a
// wrong token, 403, 404, …) is named.
func refusal(err error) (string, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false
	}
	if e.Status == http.StatusBadRequest {
		return e.Message, true
	}
	return fmt.Sprintf("ERR upstash rest: HTTP %d: %s", e.Status, e.Message), true
}
