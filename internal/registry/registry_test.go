package registry

import (
	"reflect"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
)

func testRegistry() *Registry {
	r := &Registry{}
	noop := func(ctrl.Manager) error { return nil }
	r.Add("rebootpolicy", noop)
	r.Add("memcached", noop)
	r.Add("nsscaler", noop)
	return r
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func TestSelect(t *testing.T) {
	tests := []struct {
		list    string
		want    []string
		wantErr string
	}{
		{list: "", want: []string{"rebootpolicy", "memcached", "nsscaler"}},
		{list: "all", want: []string{"rebootpolicy", "memcached", "nsscaler"}},
		{list: "nsscaler", want: []string{"nsscaler"}},
		{list: " NSScaler , rebootpolicy ", want: []string{"rebootpolicy", "nsscaler"}},
		{list: "memcached,memcached", want: []string{"memcached"}},
		{list: "memcache", wantErr: "unknown controller(s) memcache"},
		{list: "zz,aa", wantErr: "unknown controller(s) aa, zz"},
		{list: ",", wantErr: "selects no controller"},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			got, err := testRegistry().Select(tt.list)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Select(%q) error = %v, want it to contain %q", tt.list, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), "known: rebootpolicy, memcached, nsscaler") {
					t.Fatalf("error %q does not list the known controllers", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Select(%q): %v", tt.list, err)
			}
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Fatalf("Select(%q) = %v, want %v", tt.list, names(got), tt.want)
			}
		})
	}
}

func TestAddTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice must panic")
		}
	}()
	r := testRegistry()
	r.Add("memcached", func(ctrl.Manager) error { return nil })
}
