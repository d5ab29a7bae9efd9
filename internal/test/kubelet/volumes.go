package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// saDir is where the service account token is mounted.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// prepareVolumes writes the pod's volumes under its directory: Secrets and ConfigMaps as files
// (their items, or every key), emptyDirs as directories, hostPaths under the node's directory,
// and the service account token with the cluster's CA and the namespace.
func (p *pod) prepareVolumes(ctx context.Context) error {
	for _, v := range p.spec.Volumes {
		dir := p.volumeDir(v.Name)
		switch {
		case v.Secret != nil:
			s := &corev1.Secret{}
			err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: v.Secret.SecretName}, s)
			if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
				err = nil
			}
			if err != nil {
				return fmt.Errorf("volume %s: secret %s: %w", v.Name, v.Secret.SecretName, err)
			}
			if err := writeKeys(dir, s.Data, v.Secret.Items, mode(v.Secret.DefaultMode)); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.ConfigMap != nil:
			cm := &corev1.ConfigMap{}
			err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: v.ConfigMap.Name}, cm)
			if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				err = nil
			}
			if err != nil {
				return fmt.Errorf("volume %s: configmap %s: %w", v.Name, v.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			if err := writeKeys(dir, data, v.ConfigMap.Items, mode(v.ConfigMap.DefaultMode)); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return err
			}
		case v.HostPath != nil:
			if err := os.MkdirAll(p.node.hostPath(v.HostPath.Path), 0o755); err != nil {
				return err
			}
		default:
			return fmt.Errorf("volume %s: only secret, configMap, emptyDir and hostPath volumes are emulated", v.Name)
		}
	}
	if p.spec.AutomountServiceAccountToken != nil && !*p.spec.AutomountServiceAccountToken {
		return nil
	}
	sa := p.spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	token, err := p.node.Token(ctx, p.namespace, sa)
	if err != nil {
		return fmt.Errorf("service account token of %s: %w", sa, err)
	}
	return writeKeys(filepath.Join(p.dir, "serviceaccount"), map[string][]byte{
		"token": []byte(token), "ca.crt": p.node.CAData, "namespace": []byte(p.namespace),
	}, nil, 0o644)
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, m os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(rel string, content []byte, fm os.FileMode) error {
		p := filepath.Join(dir, filepath.Clean("/"+rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, content, fm); err != nil {
			return err
		}
		return os.Chmod(p, fm)
	}
	if len(items) == 0 {
		for k, v := range data {
			if err := write(k, v, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %s is missing", it.Key)
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := write(it.Path, v, fm); err != nil {
			return err
		}
	}
	return nil
}

func (p *pod) volumeDir(name string) string { return filepath.Join(p.dir, "volumes", name) }

// mounts are a container's volume mounts, its service account token and /etc/hosts.
func (p *pod) mounts(c corev1.Container) ([]mountSpec, error) {
	var out []mountSpec
	for _, vm := range c.VolumeMounts {
		var v *corev1.Volume
		for i := range p.spec.Volumes {
			if p.spec.Volumes[i].Name == vm.Name {
				v = &p.spec.Volumes[i]
			}
		}
		if v == nil {
			return nil, fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, vm.Name)
		}
		src := p.volumeDir(v.Name)
		if v.HostPath != nil {
			src = p.node.hostPath(v.HostPath.Path)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, filepath.Clean("/"+vm.SubPath))
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
		}
		out = append(out, mountSpec{Kind: mountBind, Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly, File: !st.IsDir()})
	}
	if _, err := os.Stat(filepath.Join(p.dir, "serviceaccount")); err == nil {
		out = append(out, mountSpec{Kind: mountBind, Source: filepath.Join(p.dir, "serviceaccount"), Target: saDir, ReadOnly: true})
	}
	return append(out, mountSpec{Kind: mountBind, Source: p.hostsFile, Target: "/etc/hosts", File: true}), nil
}

// env resolves a container's environment as the kubelet and the runtime do: the image's
// variables (a default PATH when it has none), the kubernetes Service's, then envFrom, then env in
// order, each value with $(VAR) expanded against the variables before it.
func (p *pod) env(c corev1.Container, img Image) ([]string, error) {
	ctx := context.Background()
	vars := slices.Clone(img.Env)
	if !slices.ContainsFunc(vars, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		vars = append(vars, defaultPath)
	}
	vars = append(vars, "KUBERNETES_SERVICE_HOST="+p.node.APIHost, "KUBERNETES_SERVICE_PORT="+p.node.APIPort, "HOSTNAME="+p.name)
	set := func(k, v string) { vars = append(vars, k+"="+v) }
	lookup := func(name string) (string, bool) {
		for i := len(vars) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(vars[i], "="); k == name {
				return v, true
			}
		}
		return "", false
	}
	for _, from := range c.EnvFrom {
		data, err := p.sourceData(ctx, from.ConfigMapRef, from.SecretRef)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := p.valueFrom(ctx, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	return vars, nil
}

func (p *pod) sourceData(ctx context.Context, cmRef *corev1.ConfigMapEnvSource, sRef *corev1.SecretEnvSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case cmRef != nil:
		cm := &corev1.ConfigMap{}
		if err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: cmRef.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) && cmRef.Optional != nil && *cmRef.Optional {
				return out, nil
			}
			return nil, err
		}
		return cm.Data, nil
	case sRef != nil:
		s := &corev1.Secret{}
		if err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: sRef.Name}, s); err != nil {
			if apierrors.IsNotFound(err) && sRef.Optional != nil && *sRef.Optional {
				return out, nil
			}
			return nil, err
		}
		for k, v := range s.Data {
			out[k] = string(v)
		}
	}
	return out, nil
}

// valueFrom resolves a field reference or a Secret or ConfigMap key (ok false: an optional key
// that is missing, which leaves the variable unset).
func (p *pod) valueFrom(ctx context.Context, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := p.field(src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s := &corev1.Secret{}
		err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: ref.Name}, s)
		optional := ref.Optional != nil && *ref.Optional
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
		}
		return string(v), ok, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm := &corev1.ConfigMap{}
		err := p.node.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: ref.Name}, cm)
		optional := ref.Optional != nil && *ref.Optional
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("configmap %s has no key %s", ref.Name, ref.Key)
		}
		return v, ok, nil
	}
	return "", false, fmt.Errorf("only fieldRef, secretKeyRef and configMapKeyRef are emulated")
}

// field is a downward API field of the pod.
func (p *pod) field(path string) (string, error) {
	switch path {
	case "metadata.name":
		return p.name, nil
	case "metadata.namespace":
		return p.namespace, nil
	case "metadata.uid":
		return p.uid, nil
	case "spec.nodeName":
		return p.node.Name, nil
	case "spec.serviceAccountName":
		return p.spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return p.node.IP, nil
	case "status.podIP", "status.podIPs":
		return p.ip, nil
	}
	if rest, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return p.labels[strings.TrimSuffix(rest, "']")], nil
	}
	return "", fmt.Errorf("field %s is not emulated", path)
}
