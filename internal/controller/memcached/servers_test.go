package memcached

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestServersFromSlices(t *testing.T) {
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	unready := discoveryv1.EndpointConditions{Ready: ptr.To(false)}
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   []string
	}{
		{name: "none", want: nil},
		{
			name: "ready endpoints only, sorted, across slices, deduplicated",
			slices: []discoveryv1.EndpointSlice{
				{AddressType: discoveryv1.AddressTypeIPv4,
					Ports: []discoveryv1.EndpointPort{{Name: ptr.To("memcache"), Port: ptr.To[int32](11211)}},
					Endpoints: []discoveryv1.Endpoint{
						{Addresses: []string{"10.0.0.9"}, Conditions: ready},
						{Addresses: []string{"10.0.0.3"}, Conditions: unready},
						{Addresses: []string{"10.0.0.1"}}, // nil Ready means ready
					}},
				{AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}, Conditions: ready}}},
			},
			want: []string{"10.0.0.1:11211", "10.0.0.9:11211"},
		},
		{
			name: "IPv6 gets brackets; FQDN slices are ignored",
			slices: []discoveryv1.EndpointSlice{
				{AddressType: discoveryv1.AddressTypeIPv6, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}, Conditions: ready}}},
				{AddressType: discoveryv1.AddressTypeFQDN, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"a.example"}, Conditions: ready}}},
			},
			want: []string{"[fd00::1]:11211"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serversFromSlices(tt.slices); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
