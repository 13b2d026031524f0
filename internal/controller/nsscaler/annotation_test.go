package nsscaler

import (
	"errors"
	"testing"
)

func TestOriginalEncodeIsVersioned(t *testing.T) {
	tests := []struct {
		name string
		o    Original
		want string
	}{
		{"replicas", ReplicasOriginal(3, "release"), `{"v":1,"replicas":3,"by":"release"}`},
		{"zero replicas", ReplicasOriginal(0, "r"), `{"v":1,"replicas":0,"by":"r"}`},
		{"suspend false", SuspendOriginal(false, "r"), `{"v":1,"suspend":false,"by":"r"}`},
		{"suspend true", SuspendOriginal(true, "r"), `{"v":1,"suspend":true,"by":"r"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.Encode(); got != tt.want {
				t.Fatalf("Encode() = %s, want %s", got, tt.want)
			}
			back, err := DecodeOriginal(tt.want)
			if err != nil {
				t.Fatalf("DecodeOriginal(%s): %v", tt.want, err)
			}
			if back.Encode() != tt.want {
				t.Fatalf("round trip: got %s, want %s", back.Encode(), tt.want)
			}
		})
	}
}

func TestDecodeOriginalRejects(t *testing.T) {
	tests := []struct {
		name, value string
		unknownVer  bool
	}{
		{"not json", `3`, false},
		{"garbage", `{"v":1,`, false},
		{"no version", `{"replicas":3,"by":"r"}`, true},
		{"future version", `{"v":2,"replicas":3,"by":"r"}`, true},
		{"neither field", `{"v":1,"by":"r"}`, false},
		{"both fields", `{"v":1,"replicas":1,"suspend":true,"by":"r"}`, false},
		{"negative replicas", `{"v":1,"replicas":-1,"by":"r"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeOriginal(tt.value)
			if err == nil {
				t.Fatalf("DecodeOriginal(%s) accepted", tt.value)
			}
			if got := errors.Is(err, ErrUnknownAnnotationVersion); got != tt.unknownVer {
				t.Fatalf("errors.Is(ErrUnknownAnnotationVersion) = %v, want %v (err %v)", got, tt.unknownVer, err)
			}
		})
	}
}

func TestMergePatchTouchesOnlyReplicasAndAnnotation(t *testing.T) {
	ann := ReplicasOriginal(4, "s").Encode()
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"park with record", mergePatch("42", &ann, false, map[string]any{"replicas": int32(0)}),
			`{"metadata":{"annotations":{"scaling.runbook.dev/original":"{\"v\":1,\"replicas\":4,\"by\":\"s\"}"},"resourceVersion":"42"},"spec":{"replicas":0}}`},
		{"re-park keeps annotation", mergePatch("43", nil, false, map[string]any{"replicas": int32(0)}),
			`{"metadata":{"resourceVersion":"43"},"spec":{"replicas":0}}`},
		{"restore", mergePatch("44", nil, true, map[string]any{"replicas": int32(4)}),
			`{"metadata":{"annotations":{"scaling.runbook.dev/original":null},"resourceVersion":"44"},"spec":{"replicas":4}}`},
		{"cronjob restore", mergePatch("45", nil, true, map[string]any{"suspend": false}),
			`{"metadata":{"annotations":{"scaling.runbook.dev/original":null},"resourceVersion":"45"},"spec":{"suspend":false}}`},
		{"annotation only", mergePatch("", nil, true, nil),
			`{"metadata":{"annotations":{"scaling.runbook.dev/original":null}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("patch = %s\nwant    %s", tt.got, tt.want)
			}
		})
	}
}
