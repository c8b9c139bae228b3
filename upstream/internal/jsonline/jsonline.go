// Package jsonline writes the JSON lines both of our mains print and the lab reads: one
// object per line, its event name, its wall time and the process's uptime first, so that a
// line can be placed on the lab's clock without parsing the rest.
package jsonline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Fields are the extra keys of one line.
type Fields map[string]any

// Log writes {"event":..,"wall":<unix seconds, 6 decimals>,"uptime_s":..,<extra keys sorted>}.
// It is safe for concurrent use: each line is written whole by one Write.
type Log struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// New starts the uptime clock now.
func New(out io.Writer) *Log {
	return &Log{out: out, start: time.Now()}
}

// Wall is t in unix seconds to the microsecond, as a JSON number.
func Wall(t time.Time) json.Number {
	return json.Number(fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000))
}

// Emit writes one line stamped now.
func (l *Log) Emit(event string, extra Fields) { l.EmitAt(event, time.Now(), extra) }

// EmitAt writes one line stamped at.
func (l *Log) EmitAt(event string, at time.Time, extra Fields) {
	var b bytes.Buffer
	name, _ := json.Marshal(event)
	fmt.Fprintf(&b, `{"event":%s,"wall":%s,"uptime_s":%s`, name, Wall(at),
		strconv.FormatFloat(at.Sub(l.start).Seconds(), 'f', 6, 64))
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := json.Marshal(extra[k])
		if err != nil {
			v, _ = json.Marshal(fmt.Sprint(extra[k]))
		}
		kk, _ := json.Marshal(k)
		fmt.Fprintf(&b, ",%s:%s", kk, v)
	}
	b.WriteString("}\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.out.Write(b.Bytes())
}
