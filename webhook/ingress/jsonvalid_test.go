package ingress

import (
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
