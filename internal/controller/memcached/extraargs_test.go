package memcached

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/testenv"
)

func TestCheckExtraArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		auth    bool
		wantErr string // "" accepted
	}{
		{name: "the issue's bundle", args: []string{"-Mm1048576"}, wantErr: "sets -m (--memory-limit)"},
		{name: "the issue's memory prefix", args: []string{"--memory-limi=99999"}, wantErr: "sets -m (--memory-limit)"},
		{name: "the issue's threads prefix", args: []string{"--threa=5000"}, wantErr: "set spec.threads"},
		{name: "TLS without certificates", args: []string{"-Z"}, wantErr: "set spec.tls"},
		{name: "SASL", args: []string{"-S"}, wantErr: "SASL is not supported"},
		{name: "auth file", args: []string{"--auth-file=/tmp/x"}, wantErr: "set spec.auth"},
		{name: "bundled TLS", args: []string{"-MZ"}, wantErr: "set spec.tls"},
		{name: "version exits", args: []string{"-V"}, wantErr: "never start"},
		{name: "-p in the next argument of a bundle", args: []string{"-Mp", "1"}, wantErr: "port is fixed"},
		{name: "--u is ambiguous", args: []string{"--u", "root"}, wantErr: "ambiguous"},
		{name: "--us is --user", args: []string{"--us", "root"}, wantErr: "sets -u (--user)"},
		{name: "ssl_key sub-option", args: []string{"-o", "modern,ssl_key=/tmp/k"}, wantErr: "sub-option ssl_key"},
		{name: "ssl_ca_cert attached", args: []string{"-ossl_ca_cert=/x"}, wantErr: "sub-option ssl_ca_cert"},
		{name: "ssl_min_version through --extended", args: []string{"--extended=ssl_min_version=0"}, wantErr: "sub-option ssl_min_version"},
		{name: "ssl_verify_mode through --ext", args: []string{"--ext", "ssl_verify_mode=0"}, wantErr: "sub-option ssl_verify_mode"},
		{name: "blank before a sub-option", args: []string{"-o", " ssl_key=/x"}, wantErr: "sub-option ssl_key"},
		{name: "unknown sub-option syntax", args: []string{"-o", "modern,,x"}, wantErr: "does not know"},
		{name: "missing value", args: []string{"-o"}, wantErr: "refuse to start"},
		{name: "binary protocol with auth", args: []string{"-B", "binary"}, auth: true, wantErr: "speaks only ascii"},
		{name: "auto protocol with auth", args: []string{"--protocol=auto"}, auth: true, wantErr: "speaks only ascii"},
		{name: "ascii protocol with auth", args: []string{"-B", "ascii"}, auth: true},
		{name: "binary protocol without auth", args: []string{"-B", "binary"}},
		{name: "plain tuning", args: []string{"-o", "modern,no_lru_crawler", "-M", "--lock-memory", "-R", "40"}},
		{name: "extstore", args: []string{"-o", "ext_path=/data/extstore:1G,ext_threads=2"}},
		{name: "TLS tuning stays", args: []string{"-o", "ssl_ciphers=ECDHE+AESGCM,ssl_session_cache"}},
		{name: "a managed-looking value", args: []string{"-D", "-m"}},
		{name: "after --, nothing counts", args: []string{"--", "-m", "1"}},
		{name: "unambiguous prefix of a free option", args: []string{"--disable-e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkExtraArgs(tt.args, argsContext{auth: tt.auth})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// The CRD's extraArgs rule carries celExtraArgsPattern as a literal: the
// two must be the same string.
func TestCRDCarriesTheExtraArgsPattern(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "cache.runbook.dev_memcacheds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	rules := spec.Properties["extraArgs"].XValidations
	if len(rules) != 1 {
		t.Fatalf("extraArgs has %d rules, want 1", len(rules))
	}
	want := "self.all(a, !a.matches('" + celExtraArgsPattern() + "'))"
	if rules[0].Rule != want {
		t.Errorf("CRD rule\n  %s\nwant (regenerate the marker from celExtraArgsPattern)\n  %s", rules[0].Rule, want)
	}
}

// On a single argument the CRD's pattern never refuses what the parser
// accepts, and it catches every controlled option the parser finds there:
// checked for every short bundle of up to three letters and every
// spelling of every long option, with and without "=value".
func TestCELPatternAgreesWithTheParser(t *testing.T) {
	cel := regexp.MustCompile(celExtraArgsPattern())
	var letters []byte
	for _, o := range memcachedOptions {
		letters = append(letters, o.short)
	}
	check := func(arg string) {
		t.Helper()
		// A value after it, for an option that takes the next argument.
		opts, err := parseMemcachedArgs([]string{arg, "5"})
		controlled := false
		for _, o := range opts {
			if _, ok := controlledOptions[o.opt.short]; ok && o.arg == 0 {
				controlled = true
			}
		}
		switch {
		case cel.MatchString(arg) && err == nil && !controlled:
			t.Errorf("%q: the pattern refuses it, the parser accepts it (%s)", arg, render(opts))
		case controlled && !cel.MatchString(arg):
			t.Errorf("%q: the parser finds a controlled option (%s), the pattern lets it through", arg, render(opts))
		}
	}
	for _, a := range letters {
		check("-" + string(a))
		for _, b := range letters {
			check("-" + string([]byte{a, b}))
			for _, c := range letters {
				check("-" + string([]byte{a, b, c}))
			}
		}
	}
	for _, o := range memcachedOptions {
		for n := 1; n <= len(o.long); n++ {
			check("--" + o.long[:n])
			check("--" + o.long[:n] + "=1")
		}
	}
}
