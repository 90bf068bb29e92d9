package amqpaddr

import (
	"net"
	"strings"
	"testing"

	"github.com/olp-edu/borda/internal/servicetest"
)

func TestSplitTrimsAndDropsEmpty(t *testing.T) {
	got := Split(" amqp://a:1/ ,, amqp://b:2/,")
	if len(got) != 2 || got[0] != "amqp://a:1/" || got[1] != "amqp://b:2/" {
		t.Fatalf("Split = %q", got)
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
