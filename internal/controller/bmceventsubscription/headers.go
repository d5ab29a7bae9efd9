package bmceventsubscription

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// digestPrefix starts a headers version (headersVersion). The operator recorded the Secret's
// resourceVersion (digits) before: such an annotation is told by its lack of it.
const digestPrefix = "hmac-sha256:"

// headers reads spec.httpHeadersRef: every key of the Secret is a header. The values are never
// shown (they carry tokens). secret is nil without a reference.
func (s *scope) headers() (headers map[string]string, secret *corev1.Secret, err error) {
	ref := s.sub.Spec.HTTPHeadersRef
	if ref == nil {
		return nil, nil, nil
	}
	secret, err = s.headersSecret(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("spec.httpHeadersRef: Secret %q not found in namespace %q", ref.Name, s.sub.Namespace)
	} else if err != nil {
		return nil, nil, fmt.Errorf("spec.httpHeadersRef: reading Secret %q: %w", ref.Name, err)
	}
	headers = make(map[string]string, len(secret.Data))
	for k, v := range secret.Data {
		headers[k] = strings.TrimSpace(string(v))
	}
	return headers, secret, nil
}

// headersSecret reads the headers Secret from the cache, or, the first time, from the API server,
// labelling it for the cache (metal3 labels the Secrets it uses alike): from then on its changes
// wake the subscriptions that use it.
func (s *scope) headersSecret(name string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: s.sub.Namespace, Name: name}
	if err := cacheview.GetLabelling(s.ctx, s.r.Client, s.r.APIReader, key, secret, metal3.EnvironmentLabel, metal3.EnvironmentLabelValue); err != nil {
		return nil, err
	}
	return secret, nil
}

// headersVersion names the headers a subscription carries, recorded in
// HTTPHeadersVersionAnnotation ("" without a Secret). A digest of the headers as sent, not the
// Secret's resourceVersion: its labels, annotations, finalizers and owners move that too, and each
// such change renewed the subscription on the BMC for nothing. Keyed with the Secret's UID, so
// that whoever reads the subscription but not the Secret cannot check guesses of a header value (a
// weak password in a Basic header) against the annotation; a Secret deleted and created again
// with the same data therefore renews the subscription once.
func headersVersion(secret *corev1.Secret, headers map[string]string) string {
	if secret == nil {
		return ""
	}
	mac := hmac.New(sha256.New, []byte(secret.UID))
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		// Lengths first: two different sets of headers never give the same bytes.
		fmt.Fprintf(mac, "%d:%s%d:%s", len(k), k, len(headers[k]), headers[k])
	}
	return digestPrefix + hex.EncodeToString(mac.Sum(nil)[:16])
}

// headersChanged: the headers Secret no longer holds the headers the subscription on the BMC was
// created with. A subscription without a recorded version (created before the operator recorded
// it) takes the current one as its own; a Secret that cannot be read leaves the subscription as it
// is (it works with the headers it has; a re-creation would need the Secret).
func (s *scope) headersChanged() bool {
	if s.sub.Spec.HTTPHeadersRef == nil {
		return false
	}
	headers, secret, err := s.headers()
	if err != nil {
		ctrl.LoggerFrom(s.ctx).V(1).Info("Headers Secret not read; the subscription keeps its headers", "error", err.Error())
		return false
	}
	current := headersVersion(secret, headers)
	recorded := s.sub.Annotations[metal3.HTTPHeadersVersionAnnotation]
	switch {
	case recorded == current:
		return false
	case recorded == "", !strings.HasPrefix(recorded, digestPrefix) && recorded == secret.ResourceVersion:
		// None recorded, or the resourceVersion an earlier operator recorded and the Secret
		// still has: the BMC has these headers, and the digest is recorded without a renewal.
		// A Secret changed since the resourceVersion was recorded (its data, or only its
		// metadata: that version cannot tell) renews the subscription once after the upgrade.
		s.headersVersion = current
		return false
	}
	return true
}
