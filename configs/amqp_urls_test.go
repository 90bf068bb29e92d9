package configs

import (
	"strings"
	"testing"
)

// amqp.url (and AMQP_URL) may list the nodes of a cluster; every address is
// validated and named by position, and no problem prints a password.
func TestValidateAMQPURLList(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, tc := range []struct{ url, want string }{
		{"amqp://u:pw1@n1:5672/,amqp://u:pw1@n2:5672/", ""},
		{"amqp://u:pw1@n1:5672/, amqps://u:pw1@n2:5671/", ""},
		{"amqp://u:pw1@n1:5672/,,amqp://u:pw1@n2:5672/", "amqp.url (address 2)"},
		{"amqp://u:pw1@n1:5672/,http://u:pw1@n2/", "amqp.url (address 2)"},
		{"amqp://u:pw1@n1:99999/,amqp://u:pw1@n2/", "amqp.url (address 1)"},
		{"amqp://u:pw1@n1:5672/,", "amqp.url (address 2)"},
		// a comma inside one URL's password is not a separator (A28)
		{"amqp://u:pw1,x@n1:5672/", ""},
		{"amqp://u:pw1,x@n1:5672/,amqp://u:pw1,@n2:5672/", ""},
	} {
		_, err := Parse([]byte("amqp: {url: \""+tc.url+"\"}\n"), none)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err = %v, want a problem on %s", tc.url, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw1"):
			t.Errorf("%q: the problem prints the password: %v", tc.url, err)
		}
	}
	env := func(k string) (string, bool) {
		if k == "AMQP_URL" {
			return "amqp://u:pw1@n1:5672/,amqp://u:pw1@n2:5672/", true
		}
		return "", false
	}
	if _, err := Parse([]byte("{}\n"), env); err != nil {
		t.Errorf("comma list in AMQP_URL: %v", err)
	}
}
