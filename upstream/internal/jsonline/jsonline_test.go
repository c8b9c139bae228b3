package jsonline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestEventLogLineIsJSON(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	l.Emit("shutdown_initiated", Fields{"source": "x", "n": 3})
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if m["event"] != "shutdown_initiated" || m["source"] != "x" {
		t.Fatalf("unexpected %v", m)
	}
	if _, ok := m["wall"].(float64); !ok {
		t.Fatalf("wall not a number: %v", m["wall"])
	}
	if !strings.HasPrefix(buf.String(), `{"event":"shutdown_initiated","wall":`) {
		t.Fatalf("key order: %s", buf.String())
	}
}
