package memcached

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// controlledOptions are the options extraArgs may not set, each with what
// to do instead. Managed ones are set by the controller from the spec (a
// later occurrence would override them); reserved ones would break the pod
// or turn on TLS or authentication without the files they need.
var controlledOptions = map[byte]string{
	'p': "the port is fixed at 11211",
	'U': "UDP stays off",
	'l': "the listen address is managed",
	'm': "set spec.memoryMiB",
	'c': "set spec.maxConnections",
	't': "set spec.threads",
	'I': "set spec.maxItemSizeKiB",
	'v': "set spec.verbosity",
	'd': "daemon mode would end the container",
	'u': "the pod's securityContext sets the user",
	's': "a Unix socket would turn off the network listener",
	'a': "a Unix socket would turn off the network listener",
	'P': "the pid file is only written in daemon mode",
	'Z': "set spec.tls",
	'S': "SASL is not supported; set spec.auth (memcached's ASCII auth file)",
	'Y': "set spec.auth",
	'h': "it prints and exits, so the cache would never start",
	'i': "it prints and exits, so the cache would never start",
	'V': "it prints and exits, so the cache would never start",
}

// controlledSubOptions are the -o sub-options that spec.tls sets, and
// proxy mode, which would make the instances a proxy instead of a cache.
// Other ssl_* tuning (ssl_ciphers, ssl_session_cache, ssl_wbuf_size,
// ssl_kernel_tls) stays allowed.
var controlledSubOptions = map[string]string{
	"proxy_config":    "the controller runs memcached as a cache, not as a proxy",
	"ssl_chain_cert":  "set spec.tls.secretName",
	"ssl_key":         "set spec.tls.secretName",
	"ssl_keyformat":   "the key is always PEM (spec.tls.secretName)",
	"ssl_ca_cert":     "set spec.tls.clientCA",
	"ssl_verify_mode": "set spec.tls.clientCA",
	"ssl_min_version": "set spec.tls.minVersion",
}

// subOptionName is what a -o sub-option name can look like: memcached
// knows no other, and refuses to start on one it does not know.
var subOptionName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// argsContext is what the rest of the spec means for extraArgs.
type argsContext struct {
	// auth: memcached's ASCII auth file is on, which only works with the
	// ASCII protocol (memcached refuses -B binary or -B auto with it).
	auth bool
	// warmRestart: the controller sets the memory file (-e).
	warmRestart bool
}

// checkExtraArgs reads args as memcached does and refuses any option the
// controller manages or reserves, any sub-option spec.tls sets, and any
// command line memcached would refuse to start with.
func checkExtraArgs(args []string, ctx argsContext) error {
	opts, err := parseMemcachedArgs(args)
	if err != nil {
		return &invalidSpecError{Msg: err.Error() + " (memcached would refuse to start)"}
	}
	for _, o := range opts {
		if why, ok := controlledOptions[o.opt.short]; ok {
			return &invalidSpecError{Msg: fmt.Sprintf("extraArgs[%d] %q sets %s, which the controller controls: %s",
				o.arg, o.spelling, describeOption(o.opt), why)}
		}
		if o.opt.short == 'e' && ctx.warmRestart {
			return &invalidSpecError{Msg: fmt.Sprintf("extraArgs[%d] %q sets %s, which warmRestart manages", o.arg, o.spelling, describeOption(o.opt))}
		}
		if err := checkOptionValue(o, ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkOptionValue checks the values memcached would act on wrongly:
// -o sub-options and -B under auth.
func checkOptionValue(o parsedOption, ctx argsContext) error {
	switch o.opt.short {
	case 'o':
		return checkSubOptions(o)
	case 'B':
		if ctx.auth && strings.TrimLeft(o.value, " \t") != "ascii" {
			return &invalidSpecError{Msg: fmt.Sprintf("extraArgs[%d] %q sets the protocol to %q: with spec.auth memcached speaks only ascii (and refuses to start otherwise)",
				o.arg, o.spelling, o.value)}
		}
	}
	return nil
}

func checkSubOptions(o parsedOption) error {
	for _, sub := range parseSubOptions(o.value) {
		if why, ok := controlledSubOptions[sub.name]; ok {
			return &invalidSpecError{Msg: fmt.Sprintf("extraArgs[%d] %q sets the sub-option %s, which the controller controls: %s",
				o.arg, o.spelling, sub.name, why)}
		}
		if !subOptionName.MatchString(sub.name) {
			return &invalidSpecError{Msg: fmt.Sprintf("extraArgs[%d] %q has the sub-option %q, which memcached does not know (it would refuse to start)",
				o.arg, o.spelling, sub.name)}
		}
	}
	return nil
}

func describeOption(o memcachedOption) string {
	if o.long == "" {
		return fmt.Sprintf("-%c", o.short)
	}
	return fmt.Sprintf("-%c (--%s)", o.short, o.long)
}

// celExtraArgsPattern is the regular expression of the CRD's extraArgs
// rule, which refuses the cheap cases at admission: an argument whose
// short-option bundle reaches a controlled option before any option that
// takes a value, or a long option that names or abbreviates a controlled
// one. The CRD carries it as a literal; a test keeps the two equal.
func celExtraArgsPattern() string {
	var free, controlled []byte
	for _, o := range memcachedOptions {
		_, isControlled := controlledOptions[o.short]
		switch {
		case isControlled:
			controlled = append(controlled, o.short)
		case o.arg == noArgument:
			free = append(free, o.short)
		}
	}
	return fmt.Sprintf("^(-[%s]*[%s]|--(%s)(=|$))", sortedBytes(free), sortedBytes(controlled), strings.Join(controlledLongSpellings(), "|"))
}

// controlledLongSpellings are every way to write a controlled long option:
// its name and each prefix of it no other option shares, nested so that
// the pattern stays short ("t(h(r(e(a(ds?)?)?)?)?)?").
func controlledLongSpellings() []string {
	var out []string
	for _, o := range memcachedOptions {
		if _, ok := controlledOptions[o.short]; !ok || o.long == "" {
			continue
		}
		shortest := len(o.long)
		for n := len(o.long) - 1; n >= 1; n-- {
			if r, err := resolveLong(o.long[:n]); err != nil || r.short != o.short {
				break
			}
			shortest = n
		}
		out = append(out, nestedPrefixes(o.long, shortest))
	}
	sort.Strings(out)
	return out
}

// nestedPrefixes matches name[:n] for every n from shortest to len(name).
func nestedPrefixes(name string, shortest int) string {
	tail := ""
	for i := len(name) - 1; i >= shortest; i-- {
		if tail == "" {
			tail = regexp.QuoteMeta(name[i:i+1]) + "?"
			continue
		}
		tail = "(" + regexp.QuoteMeta(name[i:i+1]) + tail + ")?"
	}
	return regexp.QuoteMeta(name[:shortest]) + tail
}

func sortedBytes(b []byte) string {
	c := slices.Clone(b)
	slices.Sort(c)
	return string(c)
}
