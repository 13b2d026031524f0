package memcached

import (
	"fmt"
	"strings"
	"testing"
)

// render writes parsed options compactly: "-M -m=64 -o=modern".
func render(opts []parsedOption) string {
	var parts []string
	for _, o := range opts {
		p := fmt.Sprintf("-%c", o.opt.short)
		if o.hasValue {
			p += "=" + o.value
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func TestParseMemcachedArgsLikeGetopt(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{name: "separate value", args: []string{"-m", "64"}, want: "-m=64"},
		{name: "attached value", args: []string{"-m64"}, want: "-m=64"},
		{name: "bundled flags then a value", args: []string{"-Mm1048576"}, want: "-M -m=1048576"},
		{name: "bundle ending in an option that takes the next argument", args: []string{"-Mt", "5000"}, want: "-M -t=5000"},
		{name: "a value that looks like an option is a value", args: []string{"-B", "-m"}, want: "-B=-m"},
		{name: "an attached value ends the bundle", args: []string{"-omodern,m"}, want: "-o=modern,m"},
		{name: "-vv is two -v", args: []string{"-vv"}, want: "-v -v"},
		{name: "long with =", args: []string{"--threads=8"}, want: "-t=8"},
		{name: "long with the next argument", args: []string{"--threads", "8"}, want: "-t=8"},
		{name: "long with an empty = value", args: []string{"--threads="}, want: "-t="},
		{name: "unique prefix", args: []string{"--threa=5000"}, want: "-t=5000"},
		{name: "one-letter prefix", args: []string{"--t", "2"}, want: "-t=2"},
		{name: "prefix of memory-limit", args: []string{"--memory-limi=99999"}, want: "-m=99999"},
		{name: "exact name wins over a longer one", args: []string{"--listen", "0.0.0.0"}, want: "-l=0.0.0.0"},
		{name: "optional argument only with =", args: []string{"--verbose", "2"}, want: "-v"},
		{name: "optional argument with =", args: []string{"--verbose=2"}, want: "-v=2"},
		{name: "non-options are skipped, options after them still count", args: []string{"stray", "-m", "1"}, want: "-m=1"},
		{name: "a lone dash is not an option", args: []string{"-", "-M"}, want: "-M"},
		{name: "-- ends the options", args: []string{"-M", "--", "-m", "1"}, want: "-M"},
		{name: "long option with no short alias: -D has none, --extended is -o", args: []string{"-D:", "--ext=modern"}, want: "-D=: -o=modern"},
		{name: "unknown short", args: []string{"-q"}, wantErr: "memcached has no option -q"},
		{name: "unknown inside a bundle", args: []string{"-Mq"}, wantErr: "memcached has no option -q"},
		{name: "unknown long", args: []string{"--nope"}, wantErr: "memcached has no option --nope"},
		{name: "ambiguous prefix", args: []string{"--dis"}, wantErr: "ambiguous"},
		{name: "ambiguous between an exact name and its extension", args: []string{"--liste=x"}, wantErr: "ambiguous"},
		{name: "missing short value", args: []string{"-M", "-o"}, wantErr: "-o needs a value"},
		{name: "missing long value", args: []string{"--protocol"}, wantErr: "--protocol needs a value"},
		{name: "value for a flag", args: []string{"--lock-memory=yes"}, wantErr: "takes no value"},
		{name: "non-ASCII byte", args: []string{"-\xff"}, wantErr: `no option -\xff`},
		{name: "getopt's own punctuation is no option", args: []string{"-:"}, wantErr: "no option -:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMemcachedArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v (parsed %q), want one containing %q", err, render(got), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if r := render(got); r != tt.want {
				t.Errorf("parsed %q, want %q", r, tt.want)
			}
		})
	}
}

func TestParseSubOptions(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"modern", "modern"},
		{"modern,no_lru_crawler", "modern|no_lru_crawler"},
		{"ext_path=/data/ext:1G,ext_wbuf_size=8", "ext_path=/data/ext:1G|ext_wbuf_size=8"},
		{"  ssl_key=/k", "ssl_key=/k"},
		{"modern,", "modern"},
		{"modern,,x", "modern||x"},
		{",modern", "|modern"},
		{"a=b=c", "a=b=c"},
		{"", ""},
	}
	for _, tt := range tests {
		var parts []string
		for _, s := range parseSubOptions(tt.in) {
			p := s.name
			if s.value != "" {
				p += "=" + s.value
			}
			parts = append(parts, p)
		}
		if got := strings.Join(parts, "|"); got != tt.want {
			t.Errorf("parseSubOptions(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Every long name and every unambiguous prefix of it resolves to that
// option; every ambiguous prefix is refused.
func TestLongPrefixesResolveLikeGetopt(t *testing.T) {
	for _, o := range memcachedOptions {
		if o.long == "" {
			continue
		}
		for n := 1; n <= len(o.long); n++ {
			prefix := o.long[:n]
			var sharing []string
			for _, other := range memcachedOptions {
				if other.long != "" && strings.HasPrefix(other.long, prefix) {
					sharing = append(sharing, other.long)
				}
			}
			exact := false
			for _, s := range sharing {
				exact = exact || s == prefix
			}
			got, err := resolveLong(prefix)
			switch {
			case exact || len(sharing) == 1:
				if err != nil || (!exact && got.short != o.short) {
					t.Errorf("--%s: got %c, %v; want -%c", prefix, got.short, err, o.short)
				}
			default:
				if err == nil {
					t.Errorf("--%s (shared by %v) resolved to -%c, want ambiguous", prefix, sharing, got.short)
				}
			}
		}
	}
}
