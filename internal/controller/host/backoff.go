package host

import (
	"math/rand/v2"
	"time"
)

// maxBackoffExponent caps the backoff at 2^9 base units (metal3: 4h16m to 8h32m with a minute).
const maxBackoffExponent = 9

// ExponentialBackoff returns metal3's retry delay for the n-th consecutive error: 2^n base units
// minus a random 0-50 % (1 error: 1-2 base units, 2: 2-4, ... 9 and more: 256-512), so hosts that
// fail together do not retry together. Tests pass a small base.
func ExponentialBackoff(base time.Duration) func(errorCount int) time.Duration {
	return func(n int) time.Duration {
		n = max(1, min(n, maxBackoffExponent))
		full := base << n
		return full - time.Duration(rand.Int64N(int64(full)/2+1))
	}
}
