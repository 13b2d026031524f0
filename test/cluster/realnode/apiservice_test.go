package realnode

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

// The node's endpoint of default/kubernetes: what kube-proxy needs to send
// a pod's connection to 10.0.0.1:443 to the host's forwarder (the Service's
// port name, the node name for internalTrafficPolicy Local).
func TestAPIEndpointSlice(t *testing.T) {
	n := &Node{Name: "real-abc", link: &link{hostIP: "172.31.4.1"}}
	var s discoveryv1.EndpointSlice
	if err := yaml.UnmarshalStrict([]byte(n.apiObjects(41234)), &s); err != nil {
		t.Fatal(err)
	}
	if s.Namespace != "default" || s.Labels[discoveryv1.LabelServiceName] != "kubernetes" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Fatalf("slice %s/%s labels %v type %s", s.Namespace, s.Name, s.Labels, s.AddressType)
	}
	if len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != "172.31.4.1" ||
		s.Endpoints[0].NodeName == nil || *s.Endpoints[0].NodeName != "real-abc" {
		t.Fatalf("endpoints %+v", s.Endpoints)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "https" || *s.Ports[0].Port != 41234 {
		t.Fatalf("ports %+v", s.Ports)
	}
}

// A host forwarder copies both ways and ends with stopHostForwarders.
func TestForwardFromHost(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	n := &Node{link: &link{hostIP: "127.0.0.1"}}
	addr, err := n.ForwardFromHost(0, echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
	_ = c.Close()
	n.stopHostForwarders()
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts after stop", addr)
	}
}
