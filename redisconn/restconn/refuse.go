package restconn

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Why a command cannot travel over REST. Each REST request is answered
// at once and may run on any server connection, so nothing that waits
// for data or keeps state on the connection can.
const (
	whyBlocking = "blocks until data arrives, and the Upstash REST API answers each request at once"
	whyPubSub   = "needs a connection that stays subscribed, and each REST request is answered once"
	whyState    = "sets state on a connection, and each REST request may run on another one"
	whyAuth     = "authenticates a connection; the REST token (UPSTASH_REDIS_REST_TOKEN) authenticates each request"
	whyDB       = "selects a database; the REST endpoint serves database 0 only"
)

// refused maps a command (upper case) to why REST cannot carry it.
var refused = map[string]string{
	"BLPOP": whyBlocking, "BRPOP": whyBlocking, "BRPOPLPUSH": whyBlocking, "BLMOVE": whyBlocking,
	"BLMPOP": whyBlocking, "BZPOPMIN": whyBlocking, "BZPOPMAX": whyBlocking, "BZMPOP": whyBlocking,
	"WAIT": whyBlocking, "WAITAOF": whyBlocking,
	"SUBSCRIBE": whyPubSub, "PSUBSCRIBE": whyPubSub, "SSUBSCRIBE": whyPubSub,
	"UNSUBSCRIBE": whyPubSub, "PUNSUBSCRIBE": whyPubSub, "SUNSUBSCRIBE": whyPubSub,
	"MONITOR": whyPubSub, "SYNC": whyPubSub, "PSYNC": whyPubSub,
	"WATCH": whyState, "UNWATCH": whyState, "CLIENT": whyState, "RESET": whyState,
	"READONLY": whyState, "READWRITE": whyState, "ASKING": whyState, "QUIT": whyState,
	"AUTH":   whyAuth,
	"SELECT": whyDB,
}

// localReply returns the reply for cmd when it must not (or need not)
// reach the server, and false when it is sent. HELLO is refused as an
// unknown command would be, so go-redis keeps RESP2 (the only protocol
// REST replies translate to). An argument that is not valid UTF-8 is
// refused: the request is JSON text, where it would arrive altered.
func localReply(cmd [][]byte) ([]byte, bool) {
	name := strings.ToUpper(string(cmd[0]))
	if name == "HELLO" {
		return appendError(nil, "ERR unknown command 'HELLO': restconn speaks RESP2 over the Upstash REST API"), true
	}
	why := refused[name]
	if why == "" && (name == "XREAD" || name == "XREADGROUP") && hasArg(cmd, "BLOCK") {
		why = whyBlocking
	}
	if why != "" {
		return appendError(nil, fmt.Sprintf("ERR restconn: %s %s; use the rediss:// endpoint (REDIS_URL) for it", name, why)), true
	}
	for i, arg := range cmd {
		if !utf8.Valid(arg) {
			return appendError(nil, fmt.Sprintf("ERR restconn: argument %d of %s is not valid UTF-8, and the Upstash REST API carries JSON text", i, name)), true
		}
	}
	return nil, false
}

func hasArg(cmd [][]byte, word string) bool {
	for _, a := range cmd[1:] {
		if bytes.EqualFold(a, []byte(word)) {
			return true
		}
	}
	return false
}

// isCommand reports whether cmd is the command name (any letter case).
func isCommand(cmd [][]byte, name string) bool {
	return bytes.EqualFold(cmd[0], []byte(name))
}
