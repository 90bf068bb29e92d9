// Package restconn carries go-redis over Upstash's Redis REST API: Dial
// returns a net.Conn that takes the RESP commands go-redis writes and, on
// the first read after them, sends them as ONE HTTPS request, then serves
// the JSON reply back as RESP. A redis.Client whose Options.Dialer is
// Dialer's therefore runs every Borda component unchanged on the REST
// store (redisconn.New builds it when only UPSTASH_REDIS_REST_URL and
// UPSTASH_REDIS_REST_TOKEN are set).
//
// One batch of written commands becomes (docs/rate-limiting.md, "Upstash
// REST"):
//
//   - one command: POST <base>/ with the command as a JSON array;
//   - several commands (a go-redis Pipeline): POST <base>/pipeline, not
//     atomic, each command answered (or failed) on its own;
//   - MULTI, commands, EXEC (a go-redis TxPipeline): POST
//     <base>/multi-exec, atomic; MULTI answers +OK and each command
//     +QUEUED, EXEC the array of replies, or the transaction's error.
//
// Replies: JSON null is a nil bulk string, an integer is an integer, a
// string a bulk string (the request carries "Upstash-Encoding: base64", so
// binary values survive), an array an array, {"error": …} an error reply.
//
// What REST cannot do is refused with an error reply naming the command,
// without a request: blocking commands (BLPOP, XREAD BLOCK, WAIT, …),
// pub/sub, WATCH, SELECT, AUTH, CLIENT, MONITOR; MULTI … EXEC that is not
// the whole batch; arguments that are not valid UTF-8 (the request is
// JSON text). HELLO is answered with an error, so go-redis keeps RESP2
// (set Options.Protocol 2 and DisableIdentity to skip it and CLIENT
// SETINFO altogether).
//
// Timeouts: the request is bounded by the connection's read deadline,
// which go-redis sets to the earlier of now + ReadTimeout and the
// command's context deadline (ContextTimeoutEnabled), so a rate-limit
// decision's 30 ms deadline bounds its HTTP request too. A request that
// passes it fails with a timeout (os.ErrDeadlineExceeded): go-redis drops
// the connection, as it drops a RESP connection that timed out.
package restconn
