package restconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// exchangeOnce writes written to a Conn of a server answering reply
// (status 200) and returns the path and body the server got and the n
// bytes the Conn gave back, checking it had no more.
func exchangeOnce(t *testing.T, written, reply string, n int) (path, body, read string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, body = r.URL.Path, string(b)
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Upstash-Encoding") != "base64" {
			t.Errorf("headers %v; want the bearer token and Upstash-Encoding: base64", r.Header)
		}
		_, _ = io.WriteString(w, reply)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "tok", nil, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn, _ := Dialer(c)(context.Background(), "tcp", c.Host())
	defer conn.Close()
	if _, err := conn.Write([]byte(written)); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(iotest.OneByteReader(conn), out); err != nil { // the replies come out in pieces
		t.Fatalf("read: %v (got %q)", err, out)
	}
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, errNothingSent) {
		t.Fatalf("a read past the replies: %v, want errNothingSent", err)
	}
	return path, body, string(out)
}

// The wire forms, pinned to vectors written by hand and by Python's json
// and base64 modules (outside this code):
//
//	json.dumps([["SET","k",'a"b\\c\n\t\r\x01é/<>'], [...]], ensure_ascii=False, separators=(',',':'))
//	base64.b64encode(b"0") = MA==, b"key1" = a2V5MQ==, bytes([0,255,10,13]) = AP8KDQ==, b"PONG" = UE9ORw==
func TestWireVectors(t *testing.T) {
	t.Parallel()
	const setCmd = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$14\r\na\"b\\c\n\t\r\x01é/<>\r\n"
	const evalsha = "*5\r\n$7\r\nEVALSHA\r\n$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n$1\r\n1\r\n$5\r\nolp:k\r\n$2\r\n42\r\n"
	cases := []struct {
		name, written, reply     string
		wantPath, wantBody, want string
	}{
		{
			name: "one command", written: "*1\r\n$4\r\nPING\r\n", reply: `{"result":"UE9ORw=="}`,
			wantPath: "/", wantBody: `["PING"]`, want: "$4\r\nPONG\r\n",
		},
		{
			name: "a SCAN page", written: "*6\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$5\r\nolp:*\r\n$5\r\nCOUNT\r\n$3\r\n100\r\n",
			reply: `{"result":["MA==",["a2V5MQ==","AP8KDQ=="]]}`, wantPath: "/", wantBody: `["SCAN","0","MATCH","olp:*","COUNT","100"]`,
			want: "*2\r\n$1\r\n0\r\n*2\r\n$4\r\nkey1\r\n$4\r\n\x00\xff\n\r\r\n",
		},
		{
			name: "a pipeline", written: setCmd + evalsha,
			reply:    `[{"result":"OK"},{"error":"NOSCRIPT No matching script. Please use EVAL."}]`,
			wantPath: "/pipeline", wantBody: `[["SET","k","a\"b\\c\n\t\r\u0001é/<>"],["EVALSHA","e0e1f9fabfc9d4800c877a703b823ac0578ff8db","1","olp:k","42"]]`,
			want: "+OK\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n",
		},
		{
			name: "a transaction", written: "*1\r\n$5\r\nMULTI\r\n*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$1\r\n5\r\n*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$4\r\n7200\r\n*1\r\n$4\r\nEXEC\r\n",
			reply:    `[{"result":5},{"result":1}]`,
			wantPath: "/multi-exec", wantBody: `[["INCRBY","k","5"],["EXPIRE","k","7200"]]`,
			want: "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:5\r\n:1\r\n",
		},
		{
			name: "null, a big integer, a float, false", written: "*1\r\n$4\r\nPING\r\n", reply: `{"result":[null,9007199254740993,1.5,false]}`,
			wantPath: "/", wantBody: `["PING"]`, want: "*4\r\n$-1\r\n:9007199254740993\r\n$3\r\n1.5\r\n$-1\r\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, body, got := exchangeOnce(t, tc.written, tc.reply, len(tc.want))
			if path != tc.wantPath || body != tc.wantBody {
				t.Errorf("sent POST %s %s\nwant POST %s %s", path, body, tc.wantPath, tc.wantBody)
			}
			if got != tc.want {
				t.Errorf("replies %q\nwant    %q", got, tc.want)
			}
		})
	}
}

// FuzzJSONString: every valid UTF-8 argument reaches the server as itself
// (encoding/json decodes what appendJSONString wrote back to it).
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\x7f", "é\u2028😀", "</script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		var back []string
		body := appendJSONCommand(nil, [][]byte{[]byte("SET"), []byte(s)})
		if err := json.Unmarshal(body, &back); err != nil || len(back) != 2 || back[1] != s {
			t.Fatalf("%q encoded as %s, decoded %q, %v", s, body, back, err)
		}
	})
}

// FuzzReplies: whatever a server answers and whatever bytes were
// written, the Conn answers or fails, never panics.
func FuzzReplies(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n"), []byte(`{"result":[1,"MA==",null,[{"error":"x"}]]}`))
	f.Add([]byte("*2\r\n$4\r\nPING\r\n"), []byte(`[{"result":{}}]`))
	f.Add([]byte("*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nEXEC\r\n"), []byte(`{"error":"ERR"}`))
	f.Fuzz(func(t *testing.T, written, reply []byte) {
		cmds, err := parseCommands(written)
		if err != nil || len(cmds) > 64 {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(reply))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		_ = appendValue(nil, v)
		for _, cmd := range cmds {
			_, _ = localReply(cmd)
		}
	})
}
