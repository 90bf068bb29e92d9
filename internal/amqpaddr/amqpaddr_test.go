package amqpaddr

import (
	"net"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
)

func TestSplitTrimsAndDropsEmpty(t *testing.T) {
	if got := Fields(" amqp://a:1/ ,, amqp://b:2/,"); len(got) != 4 || got[1] != "" || got[3] != "" {
		t.Fatalf("Fields = %q, want the empty entries kept", got)
	}
	got := Split(" amqp://a:1/ ,, amqp://b:2/,")
	if len(got) != 2 || got[0] != "amqp://a:1/" || got[1] != "amqp://b:2/" {
		t.Fatalf("Split = %q", got)
	}
}

// TestSplitKeepsCommasInsideOneURL: "amqp://guest:gu,est@host/" was split
// into two unparseable addresses and the gateway refused to start after
// the upgrade that introduced lists (fresh attack pass A28). A comma
// separates addresses only before a scheme; RFC 3986 allows it unencoded
// in userinfo, path and query.
func TestSplitKeepsCommasInsideOneURL(t *testing.T) {
	cases := map[string][]string{
		"amqp://guest:gu,est@127.0.0.1:5672/attack":   {"amqp://guest:gu,est@127.0.0.1:5672/attack"},
		"amqp://u:p,@h/,amqps://u:,p@h2/":             {"amqp://u:p,@h/", "amqps://u:,p@h2/"},
		"amqp://h/v,host?heartbeat=10,x , AMQP://h2/": {"amqp://h/v,host?heartbeat=10,x", "AMQP://h2/"},
		"amqp://a:1/,amqp://b:2/, amqps://c:3/":       {"amqp://a:1/", "amqp://b:2/", "amqps://c:3/"},
		"amqp://u:a,amqp@h/":                          {"amqp://u:a,amqp@h/"},
		"amqp://u:p@h/,,,":                            {"amqp://u:p@h/"},
		"":                                            nil,
	}
	for in, want := range cases {
		got := Split(in)
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
}

// With the first nodes of the list down, every dial reaches the live one;
// with all down, the error names each address by position and never the
// URL's password.
func TestDialSkipsDeadNodesAndRedactsErrors(t *testing.T) {
	live := servicetest.AMQPURL(t)
	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "amqp://guest:s3cr3t@" + l.Addr().String() + "/"
	}
	list := dead() + "," + dead() + "," + live
	for range 6 { // every start position
		c, err := Dial(list)
		if err != nil {
			t.Fatalf("Dial with one live node: %v", err)
		}
		c.Close()
	}
	_, err := Dial(dead() + "," + dead())
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "address 2 of 2") {
		t.Fatalf("all down: %v", err)
	}
}
