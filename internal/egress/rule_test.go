package egress

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func rule(prefix string, port uint16) Rule {
	return Rule{Prefix: netip.MustParsePrefix(prefix), Port: port}
}

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Rule
	}{
		{"", nil},
		{" , ,", nil},
		{"10.0.0.0/8", []Rule{rule("10.0.0.0/8", 0)}},
		{"10.1.2.3", []Rule{rule("10.1.2.3/32", 0)}},
		{"10.1.2.3:3306", []Rule{rule("10.1.2.3/32", 3306)}},
		{"10.0.0.0/8:443", []Rule{rule("10.0.0.0/8", 443)}},
		{"fd00::1", []Rule{rule("fd00::1/128", 0)}},
		{"fd00::/64", []Rule{rule("fd00::/64", 0)}},
		{"[fd00::1]", []Rule{rule("fd00::1/128", 0)}},
		{"[fd00::1]:443", []Rule{rule("fd00::1/128", 443)}},
		{"[fd00::/64]:443", []Rule{rule("fd00::/64", 443)}},
		{"0.0.0.0/0", []Rule{rule("0.0.0.0/0", 0)}},
		{" 10.1.2.3:3306 ,, [fd00::/64]:443 , 192.168.0.0/16 ", []Rule{
			rule("10.1.2.3/32", 3306), rule("fd00::/64", 443), rule("192.168.0.0/16", 0)}},
	} {
		got, err := ParseRules(tc.in)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParseRules(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, bad := range []string{
		"10.1.2",              // short address
		"example.com",         // names are not rules
		"example.com:443",     // nor with a port
		"10.0.0.0/33",         // prefix too long
		"10.1.2.3/8",          // host bits set
		"10.1.2.3:",           // empty port
		"10.1.2.3:0",          // port 0 is "any": leave it out instead
		"10.1.2.3:65536",      // port too large
		"10.1.2.3:http",       // named port
		"10.1.2.3:+80",        // signed port
		"[fd00::1",            // missing ]
		"[fd00::1]443",        // missing : after ]
		"[fd00::1]:",          // empty port
		"[10.1.2.3:80",        // missing ]
		"fe80::1%eth0",        // zone
		"::ffff:10.1.2.3",     // IPv4-mapped
		"::ffff:10.0.0.0/104", // IPv4-mapped prefix
		"10.1.2.3 :80",        // space inside an entry
	} {
		in := "10.0.0.0/8, " + bad
		_, err := ParseRules(in)
		if err == nil {
			t.Errorf("ParseRules(%q): no error", in)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseRules(%q): error %q does not name the entry", in, err)
		}
	}
}

func TestRuleStringRoundTrip(t *testing.T) {
	for _, s := range []string{"10.0.0.0/8", "10.1.2.3", "10.1.2.3:3306", "10.0.0.0/8:443",
		"fd00::1", "fd00::/64", "[fd00::1]:443", "[fd00::/64]:443"} {
		rules, err := ParseRules(s)
		if err != nil || len(rules) != 1 {
			t.Fatalf("ParseRules(%q) = %v, %v", s, rules, err)
		}
		if got := rules[0].String(); got != s {
			t.Errorf("String() of %q = %q", s, got)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	r := rule("10.0.0.0/8", 443)
	for _, tc := range []struct {
		addr string
		port uint16
		want bool
	}{
		{"10.1.2.3", 443, true},
		{"10.1.2.3", 444, false},
		{"11.0.0.1", 443, false},
		{"::ffff:10.1.2.3", 443, false}, // callers unmap first
	} {
		if got := r.matches(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("%v matches %s:%d = %v, want %v", r, tc.addr, tc.port, got, tc.want)
		}
	}
	if !rule("10.1.2.3/32", 0).matches(netip.MustParseAddr("10.1.2.3"), 65535) {
		t.Error("port 0 should match any port")
	}
}
