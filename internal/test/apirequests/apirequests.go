// Package apirequests reads an operator's metalforge_api_requests_total counter (internal/apimetrics)
// from its /metrics endpoint, for the benchmarks that count the operator's API writes.
package apirequests

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

const metric = "metalforge_api_requests_total"

// Sample is each series' value, keyed by its label set as /metrics prints it ({resource="...",...}).
type Sample map[string]float64

// Scrape reads every metalforge_api_requests_total series from url.
func Scrape(url string) (Sample, error) {
	resp, err := http.Get(url) //nolint:noctx // local, short-lived
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	out := Sample{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[len(metric):i]] = v
	}
	return out, sc.Err()
}

// Label is the value of label name in a series key of a Sample ("" when it has none).
func Label(series, name string) string {
	key := name + `="`
	i := strings.Index(series, key)
	if i < 0 {
		return ""
	}
	rest := series[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}
