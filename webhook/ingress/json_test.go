package ingress

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jsonValidCases are the grammar's corners, each judged as json.Valid
// judges it.
var jsonValidCases = []string{
	``, ` `, `{}`, `[]`, ` {} `, `{`, `}`, `[`, `]`, `[}`, `{]`, `{"a":1}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{,"a":1}`,
	`{"a":1 "b":2}`, `{"a":1,"b":[1,2,{"c":null}]}`, `[1,2,]`, `[,1]`, `[1 2]`, `{"a":[]}`, `{"":""}`, `{1:2}`,
	`"x"`, `"`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u12"`, `"\x"`, `"a` + "\x01" + `b"`,
	"\"\xff\xfe\"", "\"olá\"", `"tab	in"`, "\"\x7f\"",
	`0`, `-0`, `01`, `-`, `1.`, `.1`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`, `00`, `1.5.2`, `+1`, `0x10`,
	`true`, `false`, `null`, `tru`, `truex`, `nul`, `nulll`, `True`, `[true,false,null]`, `{"a":true}`,
	"{\"a\":1}\n", "\t[1]\r\n", `{"a":1}{}`, `1 2`, `"a" "b"`, `{"a":"b"}x`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	strings.Repeat("[", 100),
	// Input ending right after a complete value inside a container.
	`[1`, `[1 `, `{"a":1`, `[[]`, `[true`, `{"a":{}`, `["x"`, `{"a":null `,
	// Input ending inside a key, an escape or a literal; a member without
	// a key; every hex digit's case in an escape.
	`{"a"`, `{"a" `, `{1}`, `{ 1 }`, `"\`, `{"a":"\`, `"\u123`, `["\u12`, `[tru`, `[1,2,nul`, `[fals`,
	`"\u0FFF"`, `"\uFFFF"`, `"\uffff"`, `"\uAbCd"`, `"\u9a0F"`,
	// A refused value whose second byte starts a whitespace-only tail (the
	// fuzzer's "\"\r"): a scanner that resumed there would accept it.
	"\"\r", "\"\t", "\"\n ", "t ", "n\r\n", "f\t", "[\"\r]",
}

func TestJSONValidMatchesEncodingJSON(t *testing.T) {
	cases := append([]string(nil), jsonValidCases...)
	files, _ := filepath.Glob(payloadDir + "/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		b := []byte(c)
		b = b[:len(b):len(b)] // no capacity past the input: a read past its end panics
		if got, want := jsonValid(b), json.Valid(b); got != want {
			t.Errorf("jsonValid(%.60q) = %v, json.Valid = %v", c, got, want)
		}
	}
}

func FuzzJSONValidMatchesEncodingJSON(f *testing.F) {
	for _, c := range jsonValidCases {
		if len(c) < 200 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonValid(b), json.Valid(b); got != want {
			t.Fatalf("jsonValid(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}

// referenceFieldsID is the event-id lookup as it was first written, by
// decoding into maps with encoding/json: the definition jsonMember must
// agree with on every valid JSON body.
func referenceFieldsID(body []byte, fields [][]string) (string, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "", false
	}
	vals := make([]string, 0, len(fields))
	for _, path := range fields {
		obj, v, ok := top, "", false
		for i, key := range path {
			raw, found := obj[key]
			if !found {
				break
			}
			if i < len(path)-1 {
				obj = nil
				if json.Unmarshal(raw, &obj) != nil || obj == nil {
					break
				}
				continue
			}
			raw = bytes.TrimSpace(raw)
			switch {
			case len(raw) > 0 && raw[0] == '"':
				var s string
				if json.Unmarshal(raw, &s) == nil && s != "" {
					v, ok = s, true
				}
			case len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')):
				v, ok = string(raw), true
			}
		}
		if !ok {
			return "", false
		}
		vals = append(vals, v)
	}
	return strings.Join(vals, ":"), true
}

var jsonMemberCases = []string{
	`{"instance":"i1","event":"messages.upsert","data":{"key":{"id":"K1"}}}`,
	`{"data":{"key":{"id":"first"}},"data":{"key":{"id":"last"}}}`,
	`{"data":{"key":{"id":"K\u00e9\"x"}}}`,
	`{"d\u0061ta":{"key":{"id":7}}}`,
	`{"data":{"key":{"id":-1.5e3}}}`,
	`{"data":{"key":{"id":""}}}`,
	`{"data":{"key":{"id":null}}}`,
	`{"data":{"key":[{"id":"x"}]}}`,
	`{"data":{"key":{"id":{"a":"}"}}}}`,
	` { "data" : { "key" : { "id" : "spaced" } } , "instance":"i" , "event" : "e" } `,
	`{"pad":"\\\"{[","data":{"key":{"id":"after-escapes"}},"instance":"i","event":"e"}`,
	`{"instance":"ïnstance","event":"e","data":{"key":{"id":"é"}}}`,
	`{}`, `[]`, `null`, `"data"`, `42`, `{"data":null}`,
}

var jsonMemberPaths = [][][]string{
	splitFields([]string{"data.key.id"}),
	splitFields([]string{"instance", "event", "data.key.id"}),
	splitFields([]string{"id"}),
}

func TestEventIDFieldsMatchEncodingJSON(t *testing.T) {
	for _, body := range jsonMemberCases {
		for _, fields := range jsonMemberPaths {
			got, gotOK := fieldsID([]byte(body), fields)
			want, wantOK := referenceFieldsID([]byte(body), fields)
			if got != want || gotOK != wantOK {
				t.Errorf("fieldsID(%s, %v) = %q %v, encoding/json says %q %v", body, fields, got, gotOK, want, wantOK)
			}
		}
	}
}

// FuzzEventIDFields checks the one-pass lookup against encoding/json on
// every valid JSON body, and that no input makes it panic.
func FuzzEventIDFields(f *testing.F) {
	for _, c := range jsonMemberCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, fields := range jsonMemberPaths {
			got, gotOK := fieldsID(body, fields) // must not panic, valid or not
			if !json.Valid(body) {
				continue
			}
			want, wantOK := referenceFieldsID(body, fields)
			if got != want || gotOK != wantOK {
				t.Fatalf("fieldsID(%q, %v) = %q %v, encoding/json says %q %v", body, fields, got, gotOK, want, wantOK)
			}
		}
	})
}

func BenchmarkEventIDFields(b *testing.B) {
	body := []byte(`{"event":"messages.upsert","instance":"escola-1","data":{"key":{"remoteJid":"5511999999999@s.whatsapp.net","fromMe":false,"id":"3EB0C767D26A1D8E0A5C"},"pushName":"Maria","message":{"conversation":"` + strings.Repeat("olá ", 200) + `"}}}`)
	fields := splitFields([]string{"instance", "event", "data.key.id"})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := fieldsID(body, fields); !ok {
			b.Fatal("no id")
		}
	}
}

// TestJSONMemberNeverReadsPastATruncatedObject: jsonMember's contract on
// input that is not valid JSON is "any answer, no panic, no read out of
// bounds": every prefix of a few objects, with no capacity past its end.
func TestJSONMemberNeverReadsPastATruncatedObject(t *testing.T) {
	for _, obj := range []string{
		` { "id" : "a\"b" , "n" : [1, {"x": null}] , "id":-1.5e3 } `,
		`{"instance":"i1","event":"messages.upsert","data":{"key":{"id":"K1"}}}`,
		`{"\u0069d":true,"":{}}`,
	} {
		for n := 0; n <= len(obj); n++ {
			b := []byte(obj[:n])
			for _, key := range []string{"id", "n", "data", ""} {
				jsonMember(b[:n:n], key)
			}
		}
	}
}

// TestJSONMemberFindsKeysAfterEscapedBackslashes: a string ending in an
// even run of backslashes ends at its quote ("x\\"), an odd run escapes
// it; keys are compared as encoding/json decodes them.
func TestJSONMemberFindsKeysAfterEscapedBackslashes(t *testing.T) {
	for _, c := range []struct{ obj, key, want string }{
		{`{"k":"x\\","id":"y"}`, "id", `"y"`},
		{`{"k":"x\\\\","id":"y"}`, "id", `"y"`},
		{`{"k":"x\\\"","id":"y"}`, "id", `"y"`},
		{`{"a\\":1,"id":2}`, "id", `2`},
		{`{"a\\":1,"id":2}`, `a\`, `1`},
		{`{"\u0069d":3}`, "id", `3`},
		{"{\"\x80\":4}", "\uFFFD", `4`}, // invalid UTF-8 in a key decodes to U+FFFD
		{`{"\u00e9":5}`, "é", `5`},
	} {
		if got, ok := jsonMember([]byte(c.obj), c.key); !ok || string(got) != c.want {
			t.Errorf("jsonMember(%s, %q) = %s, %v; want %s", c.obj, c.key, got, ok, c.want)
		}
	}
}
