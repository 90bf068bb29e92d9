package restconn

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// errProtocol is a write go-redis never makes: not a RESP array of bulk
// strings, or a command cut short.
var errProtocol = errors.New("restconn: the written bytes are not whole RESP commands (an array of bulk strings each)")

// parseCommands splits buf into the commands it holds, each a list of
// arguments aliasing buf. Errors: errProtocol.
func parseCommands(buf []byte) ([][][]byte, error) {
	var cmds [][][]byte
	for len(buf) > 0 {
		n, rest, err := readHeader(buf, '*')
		if err != nil || n < 1 {
			return nil, errProtocol
		}
		buf = rest
		args := make([][]byte, n)
		for i := range args {
			size, rest, err := readHeader(buf, '$')
			if err != nil || size < 0 || len(rest) < size+2 || rest[size] != '\r' || rest[size+1] != '\n' {
				return nil, errProtocol
			}
			args[i] = rest[:size:size]
			buf = rest[size+2:]
		}
		cmds = append(cmds, args)
	}
	return cmds, nil
}

// readHeader reads "<kind><n>\r\n" at the start of buf.
func readHeader(buf []byte, kind byte) (int, []byte, error) {
	end := bytes.Index(buf, []byte("\r\n"))
	if end < 2 || buf[0] != kind {
		return 0, nil, errProtocol
	}
	n, err := strconv.Atoi(string(buf[1:end]))
	if err != nil {
		return 0, nil, errProtocol
	}
	return n, buf[end+2:], nil
}

// appendBulk appends a RESP bulk string.
func appendBulk(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, s...)
	return append(dst, "\r\n"...)
}

// appendError appends a RESP error reply: msg on one line ("ERR" when
// empty), so go-redis reads it as a redis.Error with msg's prefix
// (NOSCRIPT, WRONGTYPE, …).
func appendError(dst []byte, msg string) []byte {
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	if msg == "" {
		msg = "ERR"
	}
	dst = append(dst, '-')
	dst = append(dst, msg...)
	return append(dst, "\r\n"...)
}

// appendArrayHeader appends "*n\r\n".
func appendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n"...)
}

// appendValue appends the RESP2 form of one JSON result of a request
// made with "Upstash-Encoding: base64": null → nil bulk string; an
// integer → integer; any other number → its text as a bulk string;
// "OK" → +OK; any other string → the bulk string it is the base64 of
// (kept as it is when it is not base64, as @upstash/redis does); an array
// → an array of these; {"error": "…"} → an error reply; true → 1 and
// false → nil (Lua's conversions).
func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "$-1\r\n"...)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			dst = append(dst, ':')
			dst = strconv.AppendInt(dst, n, 10)
			return append(dst, "\r\n"...)
		}
		return appendBulk(dst, x.String())
	case string:
		if x == "OK" {
			return append(dst, "+OK\r\n"...)
		}
		if b, err := base64.StdEncoding.DecodeString(x); err == nil {
			return appendBulk(dst, string(b))
		}
		return appendBulk(dst, x)
	case bool:
		if x {
			return append(dst, ":1\r\n"...)
		}
		return append(dst, "$-1\r\n"...)
	case []any:
		dst = appendArrayHeader(dst, len(x))
		for _, e := range x {
			dst = appendValue(dst, e)
		}
		return dst
	case map[string]any:
		if msg, ok := x["error"].(string); ok {
			return appendError(dst, msg)
		}
		if r, ok := x["result"]; ok {
			return appendValue(dst, r)
		}
	}
	return appendError(dst, fmt.Sprintf("ERR restconn: unexpected %T in the upstash rest reply", v))
}

// appendJSONCommand appends cmd as a JSON array of strings. Every
// argument must be valid UTF-8 (checked by the caller).
func appendJSONCommand(dst []byte, cmd [][]byte) []byte {
	dst = append(dst, '[')
	for i, arg := range cmd {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, arg)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s (valid UTF-8) as a JSON string: '"', '\\'
// and the control characters escaped, everything else as it is.
func appendJSONString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
