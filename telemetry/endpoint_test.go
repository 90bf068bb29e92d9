package telemetry

import (
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct{ path, want string }{
		{"", "/"},
		{"/", "/"},
		{"/api/alunos", "/api/alunos"},
		{"/api/alunos/42", "/api/alunos/{id}"},
		{"/api/alunos/42/notas/7", "/api/alunos/{id}/notas/{id}"},
		{"/api/alunos/42/", "/api/alunos/{id}/"},
		{"/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c2d3e4f5a", "/v1/files/{id}"},
		{"/v1/files/0B7E5E0E-58A4-4B1C-9A0E-3F1C2D3E4F5A/raw", "/v1/files/{id}/raw"},
		{"/objs/507f1f77bcf86cd799439011", "/objs/{id}"}, // Mongo ObjectID, 24 hex
		{"/commits/da39a3ee5e6b4b0d3255bfef95601890afd80709", "/commits/{id}"},
		{"/cafe/added/beef", "/cafe/added/beef"},          // short hex-looking words stay
		{"/v2/users", "/v2/users"},                        // mixed segment stays
		{"/0b7e5e0e-58a4-4b1c-9a0e-3f1c2d3e4f5", "/{id}"}, // 35 chars: not a UUID, but token-like
		{"/api/alunos/42?page=2", "/api/alunos/{id}"},
		{"/a#frag", "/a"},
		{"42", "{id}"},
		{"//x//1", "//x//{id}"},
		{"/{id}", "/{id}"},
	}
	for _, tt := range tests {
		if got := Template(tt.path); got != tt.want {
			t.Errorf("Template(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestTemplateKeepsSecretsOutOfKeys (fresh attack pass A051): one-time
// secrets in portal paths (magic-login, password reset, invite and e-mail
// verification links, a JWT) became telemetry keys and gateway_metrics
// rows kept 90 days. Every token-like segment is {id}; words, slugs and
// file names stay.
func TestTemplateKeepsSecretsOutOfKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ path, want string }{
		{"/api/auth/magic/Zx9_3kLq-8vT2mNbR7wYp4QsUe6", "/api/auth/magic/{id}"},
		{"/reset/MQ/c4rz9u-2f5a6b7c8d9e0f1a2b3c/", "/reset/MQ/{id}/"},                                                // Django
		{"/password/reset/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "/password/reset/{id}"}, // Laravel
		{"/convite/k3j4h5g6f7d8s9a0q1w2", "/convite/{id}"},                                                           // base36
		{"/verify/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-abc_DEF", "/verify/{id}"},                                 // a JWT
		{"/s/aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeF", "/s/{id}"},                                                           // 32 letters
		{"/api/relatorio-mensal-consolidado", "/api/relatorio-mensal-consolidado"},                                   // a slug without digits
		{"/static/app.bundle.min.js", "/static/app.bundle.min.js"},                                                   // a file name
		{"/api/v2/escolas/turmas", "/api/v2/escolas/turmas"},
		{"/login", "/login"},
		{"/a/ação-2024-especial", "/a/ação-2024-especial"}, // not token characters
	} {
		if got := Template(tt.path); got != tt.want {
			t.Errorf("Template(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestTemplateDropsPathParametersAndEncodedSecrets (fresh attack passes
// A35, A36): a servlet session id in a path parameter, a ";token=", a
// padded or '+'-bearing base64 token, a ','-joined token, an e-mail
// address or a CPF was a Redis key and a gateway_metrics row verbatim,
// and ";<n>" made a distinct endpoint per n. Path parameters are dropped
// (as the router matches a segment up to them) and a segment holding
// '=', '+', ',', '@' or a document number is {id}.
func TestTemplateDropsPathParametersAndEncodedSecrets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ path, want string }{
		{"/app;jsessionid=9A3F2B7C1D4E5F60718293A4B5C6D7E8/home", "/app/home"},
		{"/app;JSESSIONID=9A3F2B7C1D4E5F60718293A4B5C6D7E8", "/app"},
		{"/magic-login;token=Zx9Qm2LkP4vR8tWyZx9Qm2LkP4vR8tWy", "/magic-login"},
		{"/third;1/a", "/third/a"},
		{"/third;2/a", "/third/a"},
		{"/a;b;c/d;e=f", "/a/d"},
		{"/;x/b", "//b"},
		{"/alunos/42;v=2", "/alunos/{id}"},
		{"/magic/dGhpcyBpcyBhIHNlY3JldCB0b2tlbg==", "/magic/{id}"},
		{"/magic/dGhpcyBpcyBhIHNlY3JldA=", "/magic/{id}"},
		{"/r/Zx9Qm2LkP4vR8tWy+Zx9Qm2LkP4vR8tWy", "/r/{id}"},
		{"/reset/Zx9Qm2LkP4vR8tWy,Zx9Qm2LkP4vR8tWyQQ", "/reset/{id}"},
		{"/k/a=b", "/k/{id}"},
		{"/mail/user@example.com", "/mail/{id}"},
		{"/mail/usuário@exemplo.com.br/caixa", "/mail/{id}/caixa"},
		{"/cpf/123.456.789-09", "/cpf/{id}"},
		{"/cnpj/12.345.678/0001-90", "/cnpj/{id}/{id}"},
		{"/tel/(11) 99999-9999", "/tel/{id}"},
		{"/tel/+5511999999999", "/tel/{id}"},
		{"/agenda/2026-12-06", "/agenda/{id}"},
		// Stay: versions, words, file names.
		{"/static/1.2.3/app.js", "/static/1.2.3/app.js"},
		{"/api/v2.0/escolas", "/api/v2.0/escolas"},
		{"/api/relatorio-mensal", "/api/relatorio-mensal"},
	} {
		if got := Template(tt.path); got != tt.want {
			t.Errorf("Template(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestTemplateTakesASecretBesideAnyCharacter (fresh attack pass 7
// T01/T02): a secret next to a character a token does not hold (Django's
// signing.dumps "payload:timestamp:signature", RFC 3986's sub-delims, an
// emoji, a space) was a Redis key and a gateway_metrics row verbatim.
// Every secret shape, beside every such character, on either side, is
// {id}; slugs with accents, digits and dashes stay.
func TestTemplateTakesASecretBesideAnyCharacter(t *testing.T) {
	t.Parallel()
	secrets := []string{
		"Xk3v9Yc2bQpLrT8mZ1nW4aEhG6uJ0sOiK5dF7gH2jL0", // a Django signature (base64url of HMAC-SHA256)
		"9f86d081884c7d659a2feaa0c55ad015",            // 32 hex
		"4d7c5b1a9e2f3c6d",                            // 16 hex
		"k3j4h5g6f7d8s9a0q1w2",                        // base36
		"aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeF",            // 32 letters
	}
	// Every printable ASCII byte that is not a letter, a digit, a token
	// separator ("-_.~"), '/', or a character cut off before (";?#"),
	// and non-ASCII text.
	var around []string
	for c := byte(0x20); c < 0x7f; c++ {
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || strings.IndexByte("-_.~/;?#", c) >= 0 {
			continue
		}
		around = append(around, string(c))
	}
	around = append(around, "🔑", "ç", "MQ:1sQDFd:")
	for _, secret := range secrets {
		for _, a := range around {
			for _, seg := range []string{a + secret, secret + a, "x" + a + secret + a + "y"} {
				if got := Template("/confirm/" + seg + "/done"); got != "/confirm/{id}/done" {
					t.Errorf("Template(%q) = %q, want /confirm/{id}/done", "/confirm/"+seg+"/done", got)
				}
			}
		}
	}
	for _, keep := range []string{"/a/relatório-2024-especial-final", "/a/ação-2024-especial", "/api/relatorio-mensal-consolidado", "/docs/guia:instalação", "/api/v2.0/escolas", "/static/app.bundle.min.js", "/item(rascunho)"} {
		if got := Template(keep); got != keep {
			t.Errorf("Template(%q) = %q, want it kept", keep, got)
		}
	}
}

func TestTemplateAllocatesOnlyWhenReplacing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Template("/api/alunos/notas") }); n != 0 {
		t.Errorf("Template of a path without ids: %v allocs, want 0", n)
	}
}

func TestEndpointCapOverflowsToOtherPerRoutePerMinute(t *testing.T) {
	t.Parallel()
	c := newEndpointCap(2)
	get := func(route, path string, minute int64) string {
		r, tmpl := c.endpoint(route, path, 200, true, minute)
		return r + ":" + tmpl
	}
	if got := get("portal", "/a", 100); got != "portal:/a" {
		t.Fatalf("first endpoint = %q", got)
	}
	if got := get("portal", "/b/1", 100); got != "portal:/b/{id}" {
		t.Fatalf("second endpoint = %q", got)
	}
	if got := get("portal", "/c", 100); got != "portal:other" {
		t.Errorf("third distinct endpoint in the minute = %q, want portal:other", got)
	}
	if got := get("portal", "/b/2", 100); got != "portal:/b/{id}" {
		t.Errorf("known template over the cap = %q, want portal:/b/{id}", got)
	}
	if got := get("api", "/c", 100); got != "api:/c" {
		t.Errorf("other route = %q, want api:/c (the cap is per route)", got)
	}
	if got := get("portal", "/c", 101); got != "portal:/c" {
		t.Errorf("next minute = %q, want portal:/c (the cap is per minute)", got)
	}
	if got := get("", "/anything", 101); got != "unrouted:other" {
		t.Errorf("no route = %q, want unrouted:other", got)
	}
	if got := get("portal", strings.Repeat("/x", maxTemplateLen/2+1), 101); got != "portal:other" {
		t.Errorf("overlong path = %q, want portal:other", got)
	}
	get("portal", "/z", 110)
	if _, ok := c.minutes[100]; ok {
		t.Error("minute 100 still tracked after minute 110 was seen")
	}
}

// FuzzTemplate checks that any path gives a template that is stable
// (templating it again changes nothing) and never longer than the path
// plus what "{id}" adds.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"/", "/api/alunos/42", "/v1/files/0b7e5e0e-58a4-4b1c-9a0e-3f1c2d3e4f5a", "?x", "//1//", "/a/507f1f77bcf86cd799439011/b",
		"/app;jsessionid=9A3F/home", "/;x/b", "/m/YQ==", "/u/a@b.c", "/cpf/123.456.789-09"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		got := Template(path)
		if got == "" {
			t.Fatalf("Template(%q) is empty", path)
		}
		if again := Template(got); again != got {
			t.Fatalf("Template(Template(%q)) = %q, want %q", path, again, got)
		}
		if strings.ContainsAny(got, "?#;=+,@") {
			t.Fatalf("Template(%q) = %q keeps a query, a fragment, a path parameter or encoded material", path, got)
		}
		if len(got) > len(path)+4*strings.Count(path, "/")+4 {
			t.Fatalf("Template(%q) = %q grew too much", path, got)
		}
	})
}
