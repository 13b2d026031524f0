package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runbook-dev/runbook/test/cluster"
)

// renderSamples writes config/samples, as kustomize renders it, into the run
// directory and returns the file's path. The probe sample's ports follow the
// health server: the same as in the sample unless another demo holds them
// (startDemoHealthServer).
func (d *demo) renderSamples(ctx context.Context, c *cluster.Cluster) (string, error) {
	out, err := c.Kubectl(ctx, "kustomize", filepath.Join(d.root, "config", "samples"))
	if err != nil {
		return "", err
	}
	b, err := moveProbePorts([]byte(out), demoHealthAddrs, d.health.addrs)
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.runDir, "samples.yaml")
	return path, os.WriteFile(path, b, 0o600)
}

// moveProbePorts rewrites, in the RebootPolicies of a multi-document YAML
// stream, every probe port that is one of from's to the matching port of to.
// With from == to the stream is returned as it is.
func moveProbePorts(stream []byte, from, to healthAddrs) ([]byte, error) {
	moves := map[int]int{}
	for _, pair := range [][2]string{{from.http, to.http}, {from.tcp, to.tcp}, {from.grpc, to.grpc}} {
		a, err1 := portOf(pair[0])
		b, err2 := portOf(pair[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		if a != b {
			moves[a] = b
		}
	}
	if len(moves) == 0 {
		return stream, nil
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out bytes.Buffer
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if doc, err = movePortsInPolicy(doc, moves); err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
}

// movePortsInPolicy rewrites every "port" under spec of a RebootPolicy
// document; any other document is returned as it is.
func movePortsInPolicy(doc []byte, moves map[int]int) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	if obj["kind"] != "RebootPolicy" {
		return doc, nil
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if p, ok := child.(float64); ok && k == "port" {
					if to, ok := moves[int(p)]; ok {
						v[k] = to
					}
					continue
				}
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(obj["spec"])
	return yaml.Marshal(obj)
}

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("health address %q: %w", addr, err)
	}
	return strconv.Atoi(p)
}
