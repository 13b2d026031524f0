package memcached

import (
	"fmt"
	"strings"
)

// This file reads a memcached command line the way memcached reads it:
// getopt_long(3) over memcached's own option table (glibc and musl agree on
// everything used here). What that means for extraArgs:
//
//   - short options bundle: "-Mm64" is -M, then -m with the value "64";
//   - an option that takes a value takes the rest of its bundle, or else the
//     whole next argument, whatever it looks like ("-B", "-m" gives -B the
//     value "-m");
//   - long options are "--name=value" or "--name value", and any
//     unambiguous prefix of a name stands for it ("--threa=8" is --threads);
//     an exact name wins over longer names it is a prefix of;
//   - arguments that are not options are skipped (getopt permutes them to
//     the end and memcached ignores them), and "--" ends the options;
//   - -o (--extended) takes a comma-separated list of sub-options
//     "name[=value]", matched exactly (getsubopt(3)).
//
// Anything getopt would refuse (an unknown option, an ambiguous prefix, a
// missing value, a value for a long option that takes none) makes memcached
// exit at start, so it is refused here too.

// argKind says whether an option takes a value, as in getopt's table.
type argKind int

const (
	noArgument argKind = iota
	requiredArgument
	// optionalArgument: only "--name=value" gives a long option a value.
	optionalArgument
)

// memcachedOption is one entry of memcached's option table: its short
// letter, its long name ("" when it has none) and whether it takes a value.
type memcachedOption struct {
	short byte
	long  string
	arg   argKind
}

// memcachedOptions is memcached's option table (the shortopts string and
// the longopts array of memcached.c), identical in 1.6.18 (Debian, the
// tests' binary) and 1.6.38 (the default image).
var memcachedOptions = []memcachedOption{
	{'a', "unix-mask", requiredArgument},
	{'A', "enable-shutdown", noArgument},
	{'Z', "enable-ssl", noArgument},
	{'p', "port", requiredArgument},
	{'s', "unix-socket", requiredArgument},
	{'U', "udp-port", requiredArgument},
	{'m', "memory-limit", requiredArgument},
	{'M', "disable-evictions", noArgument},
	{'c', "conn-limit", requiredArgument},
	{'k', "lock-memory", noArgument},
	{'h', "help", noArgument},
	{'i', "license", noArgument},
	{'V', "version", noArgument},
	{'r', "enable-coredumps", noArgument},
	{'v', "verbose", optionalArgument},
	{'d', "daemon", noArgument},
	{'l', "listen", requiredArgument},
	{'u', "user", requiredArgument},
	{'P', "pidfile", requiredArgument},
	{'f', "slab-growth-factor", requiredArgument},
	{'n', "slab-min-size", requiredArgument},
	{'t', "threads", requiredArgument},
	{'D', "", requiredArgument},
	{'L', "enable-largepages", noArgument},
	{'R', "max-reqs-per-event", requiredArgument},
	{'C', "disable-cas", noArgument},
	{'b', "listen-backlog", requiredArgument},
	{'B', "protocol", requiredArgument},
	{'I', "max-item-size", requiredArgument},
	{'S', "enable-sasl", noArgument},
	{'F', "disable-flush-all", noArgument},
	{'X', "disable-dumping", noArgument},
	{'W', "disable-watch", noArgument},
	{'Y', "auth-file", requiredArgument},
	{'e', "memory-file", requiredArgument},
	{'o', "extended", requiredArgument},
	{'N', "napi-ids", requiredArgument},
}

// parsedOption is one option as memcached sees it.
type parsedOption struct {
	opt memcachedOption
	// value is the option's value ("" when it has none); hasValue tells
	// "-o ''" from "-v".
	value    string
	hasValue bool
	// arg is the index of the argument the option starts in, spelling how
	// it was written there ("-Mm64", "--threa=8"): for messages.
	arg      int
	spelling string
}

// getoptError is a command line getopt refuses: memcached would exit.
type getoptError struct {
	arg int
	msg string
}

func (e *getoptError) Error() string { return fmt.Sprintf("extraArgs[%d]: %s", e.arg, e.msg) }

// parseMemcachedArgs reads args the way memcached's getopt_long loop does.
func parseMemcachedArgs(args []string) ([]parsedOption, error) {
	var out []parsedOption
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out, nil
		case strings.HasPrefix(a, "--"):
			o, next, err := parseLong(args, i)
			if err != nil {
				return nil, err
			}
			out, i = append(out, o), next
		case len(a) > 1 && a[0] == '-':
			opts, next, err := parseShortBundle(args, i)
			if err != nil {
				return nil, err
			}
			out, i = append(out, opts...), next
		}
		// Anything else is not an option: getopt moves it to the end and
		// memcached never looks at it.
	}
	return out, nil
}

// parseLong reads the long option args[i] (and its value from args[i+1]
// when it takes one and has no "="); it returns the index of the last
// argument it used.
func parseLong(args []string, i int) (parsedOption, int, error) {
	name, value, hasEq := strings.Cut(args[i][2:], "=")
	opt, err := resolveLong(name)
	if err != nil {
		return parsedOption{}, i, &getoptError{i, fmt.Sprintf("%q: %v", args[i], err)}
	}
	o := parsedOption{opt: opt, arg: i, spelling: args[i], value: value, hasValue: hasEq}
	switch {
	case opt.arg == noArgument && hasEq:
		return o, i, &getoptError{i, fmt.Sprintf("%q: --%s takes no value", args[i], opt.long)}
	case opt.arg == requiredArgument && !hasEq:
		if i+1 >= len(args) {
			return o, i, &getoptError{i, fmt.Sprintf("%q: --%s needs a value", args[i], opt.long)}
		}
		o.value, o.hasValue = args[i+1], true
		return o, i + 1, nil
	}
	return o, i, nil
}

// resolveLong finds the long option name stands for: the option of exactly
// that name, else the only one whose name starts with it.
func resolveLong(name string) (memcachedOption, error) {
	var matches []memcachedOption
	for _, o := range memcachedOptions {
		switch {
		case o.long == "":
		case o.long == name:
			return o, nil
		case name != "" && strings.HasPrefix(o.long, name):
			matches = append(matches, o)
		}
	}
	switch len(matches) {
	case 0:
		return memcachedOption{}, fmt.Errorf("memcached has no option --%s", name)
	case 1:
		return matches[0], nil
	}
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = "--" + m.long
	}
	return memcachedOption{}, fmt.Errorf("ambiguous: it abbreviates %s", strings.Join(names, ", "))
}

// parseShortBundle reads the short options bundled in args[i]; the first
// one that takes a value ends the bundle with the rest of it, or takes
// args[i+1]. It returns the index of the last argument it used.
func parseShortBundle(args []string, i int) ([]parsedOption, int, error) {
	a := args[i]
	var out []parsedOption
	for j := 1; j < len(a); j++ {
		opt, ok := shortOption(a[j])
		if !ok {
			return nil, i, &getoptError{i, fmt.Sprintf("%q: memcached has no option -%s", a, printable(a[j]))}
		}
		o := parsedOption{opt: opt, arg: i, spelling: a}
		if opt.arg != requiredArgument {
			// Short -v takes no value ("v" has no ':' in shortopts).
			out = append(out, o)
			continue
		}
		if j+1 < len(a) {
			o.value, o.hasValue = a[j+1:], true
			return append(out, o), i, nil
		}
		if i+1 >= len(args) {
			return nil, i, &getoptError{i, fmt.Sprintf("%q: -%c needs a value", a, opt.short)}
		}
		o.value, o.hasValue = args[i+1], true
		return append(out, o), i + 1, nil
	}
	return out, i, nil
}

func shortOption(c byte) (memcachedOption, bool) {
	for _, o := range memcachedOptions {
		if o.short == c {
			return o, true
		}
	}
	return memcachedOption{}, false
}

func printable(c byte) string {
	if c >= 0x21 && c < 0x7f {
		return string(c)
	}
	return fmt.Sprintf("\\x%02x", c)
}

// subOption is one "name[=value]" of a -o list.
type subOption struct {
	name  string
	value string
}

// parseSubOptions splits the value of -o like memcached: leading blanks of
// the whole value are skipped (memcached 1.6.38 skips them; 1.6.18 then
// fails to match the first name, which only makes it refuse), then the
// list is split at commas and each item at its first '='.
func parseSubOptions(value string) []subOption {
	value = strings.TrimLeft(value, " \t\n\v\f\r")
	if value == "" {
		return nil
	}
	// A single trailing comma ends the list (getsubopt then finds nothing
	// more); an empty item anywhere else is an item memcached refuses.
	items := strings.Split(strings.TrimSuffix(value, ","), ",")
	out := make([]subOption, 0, len(items))
	for _, item := range items {
		name, v, _ := strings.Cut(item, "=")
		out = append(out, subOption{name: name, value: v})
	}
	return out
}
