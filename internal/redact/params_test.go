package redact

import (
	"strings"
	"testing"
)

// TestParamsRedactsEveryCredentialSpelling (attack B07): every
// credential-named parameter, in every separator, quoting and case
// spelling, loses its value; names and other text stay.
func TestParamsRedactsEveryCredentialSpelling(t *testing.T) {
	names := []string{"token", "access_token", "refresh-token", "id_token", "X-Auth-Token", "password", "passwd", "pwd", "db.password",
		"secret", "client_secret", "webhook_secret", "api_key", "apikey", "api-key", "X-Api-Key", "authorization", "credential", "session_id", "signature"}
	seps := []string{"=", ": ", ":", `":"`, `": "`, `\":\"`, " = "}
	const canary = "CANARYv4lue"
	n := 0
	for _, name := range names {
		for _, spelling := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			for _, sep := range seps {
				for _, scheme := range []string{"", "Bearer ", "basic "} {
					in := `erro: {"` + spelling + sep + scheme + canary + `"} & next=1`
					out := Params(in)
					n++
					if strings.Contains(out, canary) || !strings.Contains(out, spelling) || !strings.Contains(out, "next=1") {
						t.Errorf("Params(%q) = %q", in, out)
					}
				}
			}
		}
	}
	for _, keep := range []string{"status=400 reason=bad", "tokenizer ready", "no secrets here", "user=alice"} {
		if got := Params(keep); got != keep {
			t.Errorf("Params(%q) = %q, want it unchanged", keep, got)
		}
	}
	t.Logf("%d spellings", n)
}
