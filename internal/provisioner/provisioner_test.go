package provisioner

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestServiceDataFinishedBy(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		since, ended time.Time
		want         bool
	}{
		"ended after this servicing started":  {start, start.Add(40 * time.Second), true},
		"ended the second it started":         {start, start, true},
		"ended before (an earlier servicing)": {start, start.Add(-time.Hour), false},
		"start unknown (after a failure)":     {time.Time{}, start.Add(-time.Hour), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := (ServiceData{Since: tc.since}).FinishedBy(tc.ended); got != tc.want {
				t.Fatalf("FinishedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseConfigData(t *testing.T) {
	tests := map[string]struct {
		data    string
		want    map[string]any
		wantErr string // a part of the error; empty: no error
	}{
		"empty is no data":         {data: "", want: nil},
		"blank is no data":         {data: " \n\t", want: nil},
		"null document":            {data: "null\n", want: nil},
		"empty object":             {data: "{}", want: map[string]any{}},
		"YAML object":              {data: "links:\n- id: eno1\n  type: phy\n", want: map[string]any{"links": []any{map[string]any{"id": "eno1", "type": "phy"}}}},
		"JSON object":              {data: `{"role": "worker", "n": 2}`, want: map[string]any{"role": "worker", "n": float64(2)}},
		"broken YAML":              {data: "links: [eno1\n", wantErr: "not valid YAML or JSON"},
		"tab indentation":          {data: "a:\n\tb: c\n", wantErr: "not valid YAML or JSON"},
		"a list":                   {data: "- a\n- b\n", wantErr: "a list, not a YAML or JSON object"},
		"a JSON list":              {data: `[{"id": "eno1"}]`, wantErr: "a list, not a YAML or JSON object"},
		"a string":                 {data: "hostname=worker-0", wantErr: "a string, not a YAML or JSON object"},
		"a number":                 {data: "42", wantErr: "a single value, not a YAML or JSON object"},
		"a boolean":                {data: "true", wantErr: "a single value, not a YAML or JSON object"},
		"an unterminated JSON doc": {data: `{"links": [`, wantErr: "not valid YAML or JSON"},
		"where the parser stopped": {data: "a: b\nc: d: e\n", wantErr: "not valid YAML or JSON: yaml: line 2: mapping values are not allowed"},
		// The parser quotes the data in these; the message keeps only where.
		"a tagged value":   {data: "a: b\nc: !!int hunter2\n", wantErr: "not valid YAML or JSON"},
		"an unknown alias": {data: "a: *hunter2\n", wantErr: "not valid YAML or JSON"},
		"a list as key":    {data: "? [hunter2, b]\n: c\n", wantErr: "not valid YAML or JSON"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseConfigData(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got != nil {
					t.Fatalf("data %v with an error", got)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %q quotes the data", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parsed %#v, want %#v", got, tc.want)
			}
		})
	}
}
