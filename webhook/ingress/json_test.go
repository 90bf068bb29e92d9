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
		if got, want := jsonValid([]byte(c)), json.Valid([]byte(c)); got != want {
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
