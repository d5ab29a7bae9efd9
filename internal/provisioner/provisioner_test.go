package provisioner

import (
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
