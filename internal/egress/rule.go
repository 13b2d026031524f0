package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Rule matches dialled addresses inside Prefix, on Port or, if Port is 0, on
// any port.
type Rule struct {
	Prefix netip.Prefix
	Port   uint16
}

// String formats r the way ParseRules reads it.
func (r Rule) String() string {
	host := r.Prefix.String()
	if r.Prefix.IsSingleIP() {
		host = r.Prefix.Addr().String()
	}
	if r.Port == 0 {
		return host
	}
	if r.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(r.Port))
}

func (r Rule) matches(a netip.Addr, port uint16) bool {
	return r.Prefix.Contains(a) && (r.Port == 0 || r.Port == port)
}

// ParseRules parses a comma-separated list of rules, as given in a flag:
// "10.0.0.0/8", "10.1.2.3", "10.1.2.3:3306", "fd00::/64", "[fd00::1]:443",
// "[fd00::/64]:443", "10.0.0.0/8:443". An IPv6 address with a port must be
// bracketed: "fd00::1:443" is the address fd00::1:443 on any port.
// Whitespace around entries and empty entries are ignored.
func ParseRules(s string) ([]Rule, error) {
	var rules []Rule
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		r, err := parseRule(entry)
		if err != nil {
			return nil, fmt.Errorf("network rule %q: %w", entry, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(entry string) (Rule, error) {
	host, port, err := splitRule(entry)
	if err != nil {
		return Rule{}, err
	}
	prefix, err := parsePrefix(host)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Prefix: prefix}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return Rule{}, fmt.Errorf("port %q is not in 1-65535", port)
		}
		r.Port = uint16(n)
	}
	return r, nil
}

// splitRule separates the host (address or prefix) from the optional port.
func splitRule(entry string) (host, port string, err error) {
	if rest, ok := strings.CutPrefix(entry, "["); ok {
		host, after, found := strings.Cut(rest, "]")
		if !found {
			return "", "", errors.New("missing ']'")
		}
		if after == "" {
			return host, "", nil
		}
		port, ok := strings.CutPrefix(after, ":")
		if !ok || port == "" {
			return "", "", errors.New("want [address]:port")
		}
		return host, port, nil
	}
	if strings.Count(entry, ":") > 1 {
		return entry, "", nil // unbracketed IPv6: no port
	}
	host, port, found := strings.Cut(entry, ":")
	if found && port == "" {
		return "", "", errors.New("empty port")
	}
	return host, port, nil
}

// parsePrefix reads an address or a prefix. A prefix with host bits set is
// refused rather than masked: "10.1.2.3/8" is more likely a typo for a single
// host than a deliberate /8, and silently widening an allow rule is the worse
// mistake.
func parsePrefix(host string) (netip.Prefix, error) {
	if !strings.Contains(host, "/") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), checkRuleAddr(a)
	}
	p, err := netip.ParsePrefix(host)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("host bits set, did you mean %s?", p.Masked())
	}
	return p, checkRuleAddr(p.Addr())
}

// checkRuleAddr refuses forms that could never match: dialled addresses are
// compared without zone and with IPv4-mapped IPv6 unmapped.
func checkRuleAddr(a netip.Addr) error {
	switch {
	case a.Zone() != "":
		return errors.New("IPv6 zones are not supported")
	case a.Is4In6():
		return fmt.Errorf("write the IPv4-mapped address in IPv4 form (%s)", a.Unmap())
	}
	return nil
}

func matchAny(rules []Rule, addrs []netip.Addr, port uint16) bool {
	for _, r := range rules {
		for _, a := range addrs {
			if r.matches(a, port) {
				return true
			}
		}
	}
	return false
}
