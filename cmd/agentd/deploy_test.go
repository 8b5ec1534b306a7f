package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/agents"
)

// The deployment files, from cmd/agentd.
const (
	deployDir   = "../../deploy"
	k8sDir      = deployDir + "/k8s"
	otelDir     = deployDir + "/otel"
	postgresDir = deployDir + "/postgres"
	dockerfile  = deployDir + "/Dockerfile"
)

// TestDeployManifests reads deploy/ (the Dockerfile, the kustomization in deploy/k8s, the
// OpenTelemetry overlay in deploy/otel and the PostgreSQL overlay in deploy/postgres) and checks
// that it agrees with this binary: the flags and AGENTD_* variables the Deployment sets parse as
// agentd parses them, the ports match the addresses agentd listens on, the probes ask agentd's
// health service for names it serves, the grace period outlasts the drain, the agents file in
// the ConfigMap loads, and the Services, PodDisruptionBudget, HorizontalPodAutoscaler, Secrets,
// collector and database pool fit together.
func TestDeployManifests(t *testing.T) {
	base := loadKustomization(t, k8sDir)
	dep := base.one(t, "Deployment", "agentd")
	var d deployment
	dep.decode(t, &d)
	pod := d.Spec.Template
	c := pod.Spec.container(t, "agentd")
	cfg := parseContainerConfig(t, c)
	listenPort := portOf(t, "--listen", cfg.listen)

	t.Run("flags", func(t *testing.T) {
		if !slices.ContainsFunc(base.Images, func(i kustomizeImage) bool { return i.Name == c.Image }) {
			t.Errorf("container image %q is not set by the kustomization's images", c.Image)
		}
		checkSettingNames(t, c)
		if cfg.key == "" {
			t.Error("AGENTD_CONTINUATION_KEY is not set: each replica would sign with a random key, and parked runs would resume only where they parked")
		}
		if host, _, _ := net.SplitHostPort(cfg.listen); host != "" && !net.ParseIP(host).IsUnspecified() {
			t.Errorf("--listen %q: in a pod agentd must listen on every interface (\":%d\"), or probes and the Service cannot reach it", cfg.listen, listenPort)
		}
	})

	t.Run("ports", func(t *testing.T) {
		if p := c.port(t, "grpc"); p != listenPort {
			t.Errorf("container port grpc = %d, want %d (--listen %s)", p, listenPort, cfg.listen)
		}
		if cfg.metricsListen == "" {
			t.Fatal("--metrics-listen is not set, but the manifests expose a metrics port")
		}
		mp := portOf(t, "--metrics-listen", cfg.metricsListen)
		if p := c.port(t, "metrics"); p != mp {
			t.Errorf("container port metrics = %d, want %d (--metrics-listen %s)", p, mp, cfg.metricsListen)
		}
		if cfg.httpListen != "" {
			if p := c.port(t, "http"); p != portOf(t, "--http-listen", cfg.httpListen) {
				t.Errorf("container port http = %d, want %d (--http-listen %s)", p, portOf(t, "--http-listen", cfg.httpListen), cfg.httpListen)
			}
		}
		if a := pod.Metadata.Annotations["prometheus.io/port"]; a != strconv.Itoa(mp) {
			t.Errorf("annotation prometheus.io/port = %q, want %d", a, mp)
		}
	})

	t.Run("probes", func(t *testing.T) {
		probes := map[string]*probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe}
		agentService := agentdv1.AgentService_ServiceDesc.ServiceName
		for kind, p := range probes {
			if p == nil || p.GRPC == nil {
				t.Errorf("%sProbe: want a grpc probe", kind)
				continue
			}
			if p.GRPC.Port != listenPort {
				t.Errorf("%sProbe: grpc port %d, want %d (--listen)", kind, p.GRPC.Port, listenPort)
			}
			if p.GRPC.Service != "" && p.GRPC.Service != agentService {
				t.Errorf("%sProbe: grpc service %q, want %q or \"\"", kind, p.GRPC.Service, agentService)
			}
		}
		if p := c.ReadinessProbe; p != nil && p.GRPC != nil && p.GRPC.Service != agentService {
			t.Errorf("readinessProbe: service %q, want %q (NOT_SERVING as soon as agentd drains)", p.GRPC.Service, agentService)
		}
		// Ask a real agentd's health service for every name the probes use.
		addr := startAgentdForProbes(t)
		for kind, p := range probes {
			if p != nil && p.GRPC != nil {
				if got := healthStatus(t, addr, p.GRPC.Service); got != healthpb.HealthCheckResponse_SERVING {
					t.Errorf("%sProbe: agentd's health answers %v for service %q, want SERVING", kind, got, p.GRPC.Service)
				}
			}
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		grace := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second
		if grace <= cfg.drainPeriod || grace <= cfg.shutdownTimeout {
			t.Errorf("terminationGracePeriodSeconds %s must be longer than the drain period (%s) and the shutdown timeout (%s), or the kubelet kills agentd before it hands its runs back",
				grace, cfg.drainPeriod, cfg.shutdownTimeout)
		}
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable != "0" {
			t.Errorf("rollingUpdate.maxUnavailable = %q, want 0: a rollout should add a pod before it drains one", d.Spec.Strategy.RollingUpdate.MaxUnavailable)
		}
	})

	t.Run("resources and security", func(t *testing.T) {
		for _, r := range []string{"cpu", "memory"} {
			if c.Resources.Requests[r] == "" {
				t.Errorf("resources.requests.%s is not set (the HPA's CPU utilisation is relative to the request)", r)
			}
		}
		if c.Resources.Limits["memory"] == "" {
			t.Error("resources.limits.memory is not set")
		}
		sc := pod.Spec.SecurityContext
		if !sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("pod securityContext: runAsNonRoot=%v runAsUser=%s, want a non-root user", sc.RunAsNonRoot, optional(sc.RunAsUser))
		}
		if uid, _ := dockerUser(t); sc.RunAsUser == nil || *sc.RunAsUser != uid {
			t.Errorf("pod runAsUser %s, but the image's USER is %d", optional(sc.RunAsUser), uid)
		}
		csc := c.SecurityContext
		if !csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || !slices.Contains(csc.Capabilities.Drop, "ALL") {
			t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, all capabilities dropped", csc)
		}
	})

	t.Run("file modes", func(t *testing.T) {
		uid, gid := dockerUser(t)
		checkFileModes(t, pod.Spec, c, uid, gid)
	})

	t.Run("agents file", func(t *testing.T) {
		src := base.mountedFile(t, pod.Spec, c, cfg.config)
		checkAgentsFile(t, src)
		// The commented-out provider agents, uncommented, must load too.
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		uncommented := regexp.MustCompile(`(?m)^  # ?`).ReplaceAll(data, []byte("  "))
		if bytes.Equal(uncommented, data) {
			t.Fatalf("%s: no commented-out agents found", src)
		}
		p := filepath.Join(t.TempDir(), "agents.yaml")
		if err := os.WriteFile(p, uncommented, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && strings.HasSuffix(e.Name, "_API_KEY") {
				t.Setenv(e.Name, "sk-test")
			}
		}
		checkAgentsFile(t, p)
	})

	t.Run("secret", func(t *testing.T) {
		secret := loadObjects(t, filepath.Join(k8sDir, "secret.example.yaml"))
		if len(secret) != 1 || secret[0].Kind != "Secret" {
			t.Fatalf("secret.example.yaml: want one Secret, got %d objects", len(secret))
		}
		var s struct {
			StringData map[string]string `yaml:"stringData"`
		}
		secret[0].decode(t, &s)
		name := secret[0].Metadata.Name
		required := map[string]bool{}
		for _, e := range c.Env {
			if r := e.secretRef(); r != nil {
				if r.Name != name {
					t.Errorf("env %s reads Secret %q, want %q (secret.example.yaml)", e.Name, r.Name, name)
				}
				if !r.Optional {
					required[r.Key] = true
				}
			}
		}
		for _, v := range pod.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			if v.Secret.SecretName != name {
				t.Errorf("volume %s mounts Secret %q, want %q", v.Name, v.Secret.SecretName, name)
			}
			for _, it := range v.Secret.Items {
				required[it.Key] = true
			}
		}
		for k := range required {
			if _, ok := s.StringData[k]; !ok {
				t.Errorf("the Deployment needs key %q of Secret %s, which secret.example.yaml does not show", k, name)
			}
		}
		// The tokens file is that Secret's, mounted where --auth-tokens-file points.
		if cfg.authTokensFile == "" {
			t.Error("--auth-tokens-file is not set: agentd would serve without authentication")
		} else {
			tokens := base.mountedSecretKey(t, pod.Spec, c, cfg.authTokensFile)
			if _, err := loadTokens(writeTemp(t, s.StringData[tokens])); err != nil {
				t.Errorf("secret.example.yaml %s: %v", tokens, err)
			}
		}
		// The placeholder key must not start agentd; a key made as the comment says must.
		for _, e := range c.Env {
			if e.Name == "AGENTD_CONTINUATION_KEY" && e.secretRef() != nil {
				if _, err := service.LoadContinuationKey(s.StringData[e.secretRef().Key], ""); err == nil {
					t.Errorf("secret.example.yaml: the placeholder %s is accepted as a key; it must not be, so that nobody deploys it", e.secretRef().Key)
				}
			}
		}
		key := make([]byte, 32)
		rand.Read(key)
		if _, err := service.LoadContinuationKey("base64:"+base64.StdEncoding.EncodeToString(key), ""); err != nil {
			t.Errorf("a key made with base64:$(openssl rand -base64 32) is refused: %v", err)
		}
	})

	t.Run("services", func(t *testing.T) {
		grpcServices := 0
		for _, o := range base.all("Service") {
			var s svc
			o.decode(t, &s)
			if !subset(s.Spec.Selector, pod.Metadata.Labels) {
				t.Errorf("Service %s selects %v, which the pods (%v) do not all carry", o.Metadata.Name, s.Spec.Selector, pod.Metadata.Labels)
			}
			for _, p := range s.Spec.Ports {
				target := c.resolvePort(t, p.TargetPort, p.Port)
				switch target {
				case listenPort:
					grpcServices++
					if p.AppProtocol != "grpc" {
						t.Errorf("Service %s port %s: appProtocol %q, want grpc", o.Metadata.Name, p.Name, p.AppProtocol)
					}
				case portOf(t, "--metrics-listen", cfg.metricsListen):
				case httpPort(t, cfg):
					if p.AppProtocol != "http" && p.AppProtocol != "kubernetes.io/h2c" {
						t.Errorf("Service %s port %s: appProtocol %q, want http (or kubernetes.io/h2c)", o.Metadata.Name, p.Name, p.AppProtocol)
					}
				default:
					t.Errorf("Service %s port %s targets container port %d, which agentd does not listen on", o.Metadata.Name, p.Name, target)
				}
			}
		}
		if grpcServices == 0 {
			t.Error("no Service exposes agentd's gRPC port")
		}
		base.one(t, "Service", "agentd")
	})

	t.Run("pdb and hpa", func(t *testing.T) {
		var pdb struct {
			Spec struct {
				MinAvailable   yaml.Node `yaml:"minAvailable"`
				MaxUnavailable yaml.Node `yaml:"maxUnavailable"`
				Selector       struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				}
			}
		}
		base.one(t, "PodDisruptionBudget", "agentd").decode(t, &pdb)
		if !subset(pdb.Spec.Selector.MatchLabels, pod.Metadata.Labels) || len(pdb.Spec.Selector.MatchLabels) == 0 {
			t.Errorf("PodDisruptionBudget selects %v, not the pods (%v)", pdb.Spec.Selector.MatchLabels, pod.Metadata.Labels)
		}
		if (pdb.Spec.MinAvailable.Kind == 0) == (pdb.Spec.MaxUnavailable.Kind == 0) {
			t.Error("PodDisruptionBudget: set one of minAvailable and maxUnavailable")
		}
		var hpa struct {
			Spec struct {
				ScaleTargetRef struct {
					APIVersion string `yaml:"apiVersion"`
					Kind, Name string
				} `yaml:"scaleTargetRef"`
				MinReplicas int `yaml:"minReplicas"`
				MaxReplicas int `yaml:"maxReplicas"`
				Metrics     []struct {
					Type     string
					Resource struct{ Name string }
				}
			}
		}
		h := base.one(t, "HorizontalPodAutoscaler", "agentd")
		if h.APIVersion != "autoscaling/v2" {
			t.Errorf("HorizontalPodAutoscaler apiVersion %s, want autoscaling/v2", h.APIVersion)
		}
		h.decode(t, &hpa)
		if r := hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != dep.Metadata.Name || r.APIVersion != "apps/v1" {
			t.Errorf("HPA scales %+v, want the Deployment %s", r, dep.Metadata.Name)
		}
		if hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < hpa.Spec.MinReplicas {
			t.Errorf("HPA replicas %d..%d: want at least 2, so that a drain always has another replica to resume on", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		}
		for _, m := range hpa.Spec.Metrics {
			if m.Type == "Resource" && c.Resources.Requests[m.Resource.Name] == "" {
				t.Errorf("HPA scales on %s, which the container does not request", m.Resource.Name)
			}
		}
	})

	t.Run("dockerfile", func(t *testing.T) { checkDockerfile(t, listenPort) })

	t.Run("otel overlay", func(t *testing.T) { checkOTelOverlay(t, c) })

	t.Run("postgres overlay", func(t *testing.T) { checkPostgresOverlay(t, base, d, c) })
}

// checkSettingNames checks that each of the container's args is one of agentd's flags and
// that each AGENTD_* variable names one, which the args do not set too.
func checkSettingNames(t *testing.T, c container) {
	t.Helper()
	flags := agentdFlags(t)
	seen := map[string]string{}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(flags, name) {
			t.Errorf("args: %q is not one of agentd's flags (%s)", a, strings.Join(flags, ", "))
		}
		seen[name] = "args"
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "AGENTD_") {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(e.Name, "AGENTD_"), "_", "-"))
		if e.Name == "AGENTD_CONTINUATION_KEY" {
			continue // read by agentd, never a flag
		}
		if !slices.Contains(flags, name) {
			t.Errorf("env: %s names no agentd flag (%s)", e.Name, strings.Join(flags, ", "))
		}
		if seen[name] == "args" {
			t.Errorf("--%s is set both in args and as %s; the flag wins, so one of them is dead", name, e.Name)
		}
	}
}

// checkFileModes fails t for each file of the Secret and ConfigMap volumes mounted into the
// container that its process cannot read (see unreadableFiles).
func checkFileModes(t *testing.T, spec podSpec, c container, imageUID, imageGID int64) {
	t.Helper()
	for _, p := range unreadableFiles(spec, c, imageUID, imageGID) {
		t.Error(p)
	}
}

// unreadableFiles returns a line for each file of the Secret and ConfigMap volumes mounted
// into the container that its process cannot read, as the kubelet writes them: owned by
// root (uid 0) and group 0, with the item's mode, else the volume's defaultMode, else 0644.
// With fsGroup set the kubelet gives the files to that group and adds group read (these
// volumes are read-only), and the process has fsGroup among its groups. The process runs as
// the container's runAsUser and runAsGroup, else the pod's, else the image's (imageUID and
// imageGID, -1 when unknown), with the pod's supplementalGroups too.
func unreadableFiles(spec podSpec, c container, imageUID, imageGID int64) []string {
	psc, csc := spec.SecurityContext, c.SecurityContext
	uid := *cmp.Or(csc.RunAsUser, psc.RunAsUser, &imageUID)
	gid := *cmp.Or(csc.RunAsGroup, psc.RunAsGroup, &imageGID)
	var groups []int64
	if gid >= 0 {
		groups = append(groups, gid)
	}
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	groups = append(groups, psc.SupplementalGroups...)

	var out []string
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(spec.Volumes, func(v podVolume) bool { return v.Name == m.Name })
		if i < 0 {
			out = append(out, fmt.Sprintf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name))
			continue
		}
		v := spec.Volumes[i]
		var defaultMode *int64
		var items []keyToPath
		switch {
		case v.Secret != nil:
			defaultMode, items = v.Secret.DefaultMode, v.Secret.Items
		case v.ConfigMap != nil:
			defaultMode, items = v.ConfigMap.DefaultMode, v.ConfigMap.Items
		default:
			continue
		}
		if len(items) == 0 {
			items = []keyToPath{{Path: cmp.Or(m.SubPath, "*")}} // every key, at defaultMode
		}
		for _, it := range items {
			p := path.Join(m.MountPath, it.Path)
			if m.SubPath != "" {
				if it.Path != m.SubPath {
					continue
				}
				p = m.MountPath
			}
			mode := *cmp.Or(it.Mode, defaultMode, new(int64(0o644)))
			fileGID := int64(0)
			if psc.FSGroup != nil {
				fileGID = *psc.FSGroup
				mode |= 0o440
			}
			perm := mode // the bits for others
			switch {
			case uid == 0:
				perm = mode >> 6
			case slices.Contains(groups, fileGID):
				perm = mode >> 3
			}
			if perm&0o4 == 0 {
				out = append(out, fmt.Sprintf("volume %s: %s is mode %04o, owned by uid 0 and gid %d, but container %s runs as uid %d with groups %v and cannot read it; set fsGroup in the pod's securityContext, or make the file readable by others",
					v.Name, p, mode, fileGID, c.Name, uid, groups))
			}
		}
	}
	return out
}

// TestDeployManifestsFileModes checks unreadableFiles against pods whose process can and
// cannot read their files.
func TestDeployManifestsFileModes(t *testing.T) {
	const containers = "containers:\n  - name: app\n    volumeMounts:\n      - {name: files, mountPath: /etc/app}\n"
	for _, tc := range []struct {
		name     string
		pod      string // the pod's spec, less its containers
		readable bool
	}{
		{"0440 without fsGroup", "securityContext: {runAsUser: 65532, runAsGroup: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0440}}", false},
		{"0440 with fsGroup", "securityContext: {runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0440}}", true},
		{"0400 with fsGroup, which adds group read", "securityContext: {runAsUser: 65532, fsGroup: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0400}}", true},
		{"0444", "securityContext: {runAsUser: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0444}}", true},
		{"the default mode, 0644", "securityContext: {runAsUser: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s}}", true},
		{"an item's mode over defaultMode", "securityContext: {runAsUser: 65532}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0444, items: [{key: k, path: k, mode: 0440}]}}", false},
		{"a ConfigMap at 0440", "securityContext: {runAsUser: 65532}\nvolumes:\n  - {name: files, configMap: {name: c, defaultMode: 0440}}", false},
		{"group 0 among the supplementalGroups", "securityContext: {runAsUser: 65532, supplementalGroups: [0]}\nvolumes:\n  - {name: files, configMap: {name: c, defaultMode: 0440}}", true},
		{"runAsGroup 0", "securityContext: {runAsUser: 65532, runAsGroup: 0}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0440}}", true},
		{"root, the owner", "securityContext: {runAsUser: 0}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0400}}", true},
		{"0004, readable by others only", "securityContext: {runAsUser: 65532, supplementalGroups: [0]}\nvolumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0004}}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec podSpec
			if err := yaml.Unmarshal([]byte(containers+tc.pod), &spec); err != nil {
				t.Fatal(err)
			}
			got := unreadableFiles(spec, spec.container(t, "app"), 65532, -1)
			if tc.readable != (len(got) == 0) {
				t.Errorf("readable = %v, want %v: %q", len(got) == 0, tc.readable, got)
			}
		})
	}
	// The container's securityContext overrides the pod's.
	var spec podSpec
	if err := yaml.Unmarshal([]byte("securityContext: {runAsUser: 0}\ncontainers:\n  - name: app\n    securityContext: {runAsUser: 65532}\n    volumeMounts:\n      - {name: files, mountPath: /etc/app}\n"+
		"volumes:\n  - {name: files, secret: {secretName: s, defaultMode: 0440, items: [{key: auth-tokens, path: auth-tokens}]}}"), &spec); err != nil {
		t.Fatal(err)
	}
	got := unreadableFiles(spec, spec.container(t, "app"), 65532, -1)
	if len(got) != 1 || !strings.Contains(got[0], "volume files: /etc/app/auth-tokens is mode 0440") || !strings.Contains(got[0], "uid 65532") {
		t.Errorf("container runAsUser 65532 over the pod's 0: %q, want /etc/app/auth-tokens unreadable", got)
	}
}

// TestDeployManifestsDeletePatch checks that the test's reader of kustomizations leaves out
// what an overlay's patch deletes, as kustomize does, so that the checks of an overlay see
// the objects it builds.
func TestDeployManifestsDeletePatch(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"base/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - service.yaml\n",
		"base/service.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: kept\n---\n" +
			"apiVersion: v1\nkind: Service\nmetadata:\n  name: deleted\n",
		"overlay/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base\npatches:\n  - path: delete.yaml\n",
		"overlay/delete.yaml":        "apiVersion: v1\nkind: Service\nmetadata:\n  name: deleted\n$patch: delete\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, o := range loadKustomization(t, filepath.Join(dir, "overlay")).all("Service") {
		got = append(got, o.Metadata.Name)
	}
	if !slices.Equal(got, []string{"kept"}) {
		t.Errorf("the overlay's Services are %q, want [kept]", got)
	}
	if got := len(loadKustomization(t, filepath.Join(dir, "base")).all("Service")); got != 2 {
		t.Errorf("the base has %d Services, want 2", got)
	}
}

// checkAgentsFile loads the agents file at path as agentd does, and builds its agents.
func checkAgentsFile(t *testing.T, path string) {
	t.Helper()
	file, err := agents.LoadFile(path)
	if err != nil {
		t.Fatalf("the ConfigMap's agents file does not load: %v", err)
	}
	reg, err := agents.NewRegistry(file, agents.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("%s: the agents do not build: %v", path, err)
	}
	if c, ok := any(reg).(io.Closer); ok {
		c.Close()
	}
}

// checkDockerfile checks deploy/Dockerfile: a Go builder of go.mod's version that builds
// ./cmd/agentd statically, a distroless final stage that runs it as a non-root user, and a
// listen address and EXPOSE that match the Deployment's port.
func checkDockerfile(t *testing.T, listenPort int) {
	ins := dockerInstructions(t)
	var froms []string
	var built, entrypoint, user, listen string
	var exposed []string
	copied := map[string]string{} // destination: source, of COPY --from
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			f := strings.Fields(in.args)
			for i := 0; i < len(f); i++ {
				if strings.HasPrefix(f[i], "--") {
					continue
				}
				froms = append(froms, f[i])
				break
			}
		case "RUN":
			if strings.Contains(in.args, "go build") && strings.Contains(in.args, "./cmd/agentd") {
				if !strings.Contains(in.args, "CGO_ENABLED=0") {
					t.Errorf("Dockerfile: the go build does not set CGO_ENABLED=0: %s", in.args)
				}
				if m := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(in.args); m != nil {
					built = m[1]
				}
			}
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				copied[f[2]] = f[1]
			}
		case "ENTRYPOINT":
			entrypoint = in.args
		case "USER":
			user = in.args
		case "ENV":
			if v, ok := strings.CutPrefix(in.args, "AGENTD_LISTEN="); ok {
				listen = v
			}
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		}
	}
	goVersion := goModVersion(t)
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:"+goVersion) {
		t.Errorf("Dockerfile stages %q: want a golang:%s builder and a final stage", froms, goVersion)
	}
	if len(froms) > 0 && !strings.HasPrefix(froms[len(froms)-1], "gcr.io/distroless/static") {
		t.Errorf("Dockerfile: final stage %q, want gcr.io/distroless/static (a static binary needs no libc)", froms[len(froms)-1])
	}
	if built == "" {
		t.Fatal("Dockerfile: no RUN builds ./cmd/agentd with go build -o")
	}
	var bin string
	for dst, src := range copied {
		if src == built {
			bin = dst
		}
	}
	if bin == "" || entrypoint != fmt.Sprintf("[%q]", bin) {
		t.Errorf("Dockerfile: ENTRYPOINT %s does not run the binary built at %s (copied to %q)", entrypoint, built, bin)
	}
	if uid, _ := dockerUser(t); uid == 0 {
		t.Errorf("Dockerfile: USER %q runs as root", user)
	}
	if listen == "" {
		t.Fatal("Dockerfile: no ENV AGENTD_LISTEN: agentd would listen on loopback only")
	}
	p := portOf(t, "Dockerfile AGENTD_LISTEN", listen)
	if p != listenPort || !slices.Contains(exposed, strconv.Itoa(p)) {
		t.Errorf("Dockerfile: AGENTD_LISTEN %s, EXPOSE %v; the Deployment listens on %d", listen, exposed, listenPort)
	}
}

// checkOTelOverlay checks deploy/otel: the base plus a collector, and a patch whose OTEL_*
// variables agentd understands and that point at the collector's OTLP gRPC port.
func checkOTelOverlay(t *testing.T, base container) {
	k := loadKustomization(t, otelDir)
	if !slices.Contains(k.Resources, "../k8s") {
		t.Errorf("deploy/otel: resources %v, want the base ../k8s", k.Resources)
	}
	if len(k.Patches) != 1 {
		t.Fatalf("deploy/otel: want one patch, got %d", len(k.Patches))
	}
	patch := loadObjects(t, filepath.Join(otelDir, k.Patches[0].Path))
	var d deployment
	if len(patch) != 1 || patch[0].Kind != "Deployment" || patch[0].Metadata.Name != "agentd" {
		t.Fatalf("deploy/otel patch: want the Deployment agentd")
	}
	patch[0].decode(t, &d)
	c := d.Spec.Template.Spec.container(t, base.Name)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		if !slices.Contains([]string{"otlp", "console", "none"}, env[v]) {
			t.Errorf("%s=%q, want otlp, console or none", v, env[v])
		}
	}
	if env["OTEL_EXPORTER_OTLP_PROTOCOL"] != "grpc" {
		t.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q, want grpc", env["OTEL_EXPORTER_OTLP_PROTOCOL"])
	}
	for _, e := range c.Env { // $(VAR) references need VAR defined earlier
		for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(e.Value, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("%s refers to $(%s), which the patch does not define", e.Name, m[1])
			}
		}
	}
	u, err := url.Parse(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT=%q: want http://<collector service>:<port>", env["OTEL_EXPORTER_OTLP_ENDPOINT"])
	}

	// The endpoint is the collector's Service, whose port reaches the collector's OTLP gRPC
	// receiver.
	var s svc
	k.one(t, "Service", u.Hostname()).decode(t, &s)
	var cd deployment
	k.one(t, "Deployment", "otel-collector").decode(t, &cd)
	col := cd.Spec.Template.Spec.container(t, "otel-collector")
	// The image's user is not known here: runAsUser must say it.
	checkFileModes(t, cd.Spec.Template.Spec, col, -1, -1)
	if !subset(s.Spec.Selector, cd.Spec.Template.Metadata.Labels) {
		t.Errorf("Service %s does not select the collector's pods", u.Hostname())
	}
	want, _ := strconv.Atoi(u.Port())
	var target int
	for _, p := range s.Spec.Ports {
		if p.Port == want {
			target = col.resolvePort(t, p.TargetPort, p.Port)
			if p.AppProtocol != "grpc" {
				t.Errorf("Service %s port %d: appProtocol %q, want grpc", u.Hostname(), want, p.AppProtocol)
			}
		}
	}
	if target == 0 {
		t.Fatalf("Service %s has no port %d", u.Hostname(), want)
	}
	confPath := ""
	for _, a := range col.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			confPath = v
		}
	}
	var conf struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC struct{ Endpoint string }
				}
			} `yaml:"otlp"`
		}
		Exporters  map[string]any
		Processors map[string]any
		Extensions map[string]struct{ Endpoint string }
		Service    struct {
			Extensions []string
			Pipelines  map[string]struct{ Receivers, Processors, Exporters []string }
		}
	}
	decodeFile(t, k.mountedFile(t, cd.Spec.Template.Spec, col, confPath), &conf)
	if p := portOf(t, "collector otlp grpc endpoint", conf.Receivers.OTLP.Protocols.GRPC.Endpoint); p != target {
		t.Errorf("the collector's OTLP gRPC receiver listens on %d, but Service %s sends port %d to %d", p, u.Hostname(), want, target)
	}
	for name, p := range conf.Service.Pipelines {
		for _, r := range p.Receivers {
			if r != "otlp" {
				t.Errorf("pipeline %s: receiver %s is not configured", name, r)
			}
		}
		for _, e := range p.Exporters {
			if _, ok := conf.Exporters[e]; !ok {
				t.Errorf("pipeline %s: exporter %s is not configured", name, e)
			}
		}
		for _, pr := range p.Processors {
			if _, ok := conf.Processors[pr]; !ok {
				t.Errorf("pipeline %s: processor %s is not configured", name, pr)
			}
		}
	}
	for _, pipeline := range []string{"traces", "metrics"} {
		if _, ok := conf.Service.Pipelines[pipeline]; !ok {
			t.Errorf("the collector has no %s pipeline", pipeline)
		}
	}
	if hc, ok := conf.Extensions["health_check"]; ok && slices.Contains(conf.Service.Extensions, "health_check") {
		hp := portOf(t, "health_check endpoint", hc.Endpoint)
		for kind, p := range map[string]*probe{"readiness": col.ReadinessProbe, "liveness": col.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || col.resolvePort(t, p.HTTPGet.Port, 0) != hp {
				t.Errorf("collector %sProbe: want an httpGet on the health_check port %d", kind, hp)
			}
		}
	} else {
		t.Error("the collector's probes need the health_check extension, enabled")
	}
}

// PostgreSQL's default max_connections, and the connections of it kept for superusers
// (superuser_reserved_connections): what a database that nobody tuned serves. Each replica
// opens postgresListenConnections beyond its pool, to hear the other replicas.
const (
	postgresMaxConnections      = 100
	postgresReservedConnections = 3
	postgresListenConnections   = 1
)

// checkPostgresOverlay checks deploy/postgres: the base, with a patch that reads agentd's store
// from a Secret and names each replica after its pod in AGENTD_* variables agentd parses; a
// Secret example whose DSN agentd takes for PostgreSQL, with a pool that a database left at its
// defaults serves for the largest fleet the HPA and a rollout make; and the base's Services
// all still there, since clients and scrapers dial them by name.
func checkPostgresOverlay(t *testing.T, base *kustomization, d deployment, c container) {
	k := loadKustomization(t, postgresDir)
	if !slices.Contains(k.Resources, "../k8s") {
		t.Errorf("deploy/postgres: resources %v, want the base ../k8s", k.Resources)
	}
	if s := k.all("Secret"); len(s) > 0 {
		t.Errorf("deploy/postgres: the kustomization holds Secret %s; the DSN's password stays out of git (secret.example.yaml)", s[0].Metadata.Name)
	}
	var pd deployment
	for _, p := range k.Patches {
		for _, o := range loadObjects(t, filepath.Join(postgresDir, p.Path)) {
			if o.Kind == "Deployment" && o.Metadata.Name == "agentd" {
				o.decode(t, &pd)
			}
		}
	}
	if len(pd.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("deploy/postgres: no patch of the Deployment agentd")
	}
	pc := pd.Spec.Template.Spec.container(t, c.Name)
	if len(pc.Args) > 0 {
		t.Errorf("deploy/postgres patch sets args %q, which would replace the base's; set AGENTD_* variables", pc.Args)
	}
	// The container as kustomize builds it: the patch's variables merged into the base's by name.
	merged := c
	merged.Env = mergeEnv(c.Env, pc.Env)
	checkSettingNames(t, merged)
	cfg := parseContainerConfig(t, merged)

	vars := map[string]envVar{}
	for _, e := range merged.Env {
		vars[e.Name] = e
	}
	ref := vars["AGENTD_STORE"].secretRef()
	switch {
	case ref == nil:
		t.Fatal("AGENTD_STORE: want it from a Secret (valueFrom.secretKeyRef), as the DSN holds a password")
	case ref.Optional:
		t.Errorf("AGENTD_STORE: the secretKeyRef is optional; without the Secret each pod would keep its runs in its own memory")
	case cfg.store != "secret:"+ref.Key:
		t.Errorf("AGENTD_STORE does not reach --store: agentd's store is %q", cfg.store)
	}
	if id := vars["AGENTD_REPLICA_ID"]; id.ValueFrom == nil || id.ValueFrom.FieldRef == nil || id.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Error("AGENTD_REPLICA_ID: want the pod's name (valueFrom.fieldRef.fieldPath: metadata.name), unique among the live replicas")
	}

	secret := loadObjects(t, filepath.Join(postgresDir, "secret.example.yaml"))
	if len(secret) != 1 || secret[0].Kind != "Secret" {
		t.Fatalf("deploy/postgres/secret.example.yaml: want one Secret, got %d objects", len(secret))
	}
	var s struct {
		StringData map[string]string `yaml:"stringData"`
	}
	secret[0].decode(t, &s)
	for _, e := range pc.Env {
		if r := e.secretRef(); r != nil {
			if r.Name != secret[0].Metadata.Name {
				t.Errorf("env %s reads Secret %q, want %q (deploy/postgres/secret.example.yaml)", e.Name, r.Name, secret[0].Metadata.Name)
			}
			if _, ok := s.StringData[r.Key]; !ok && !r.Optional {
				t.Errorf("env %s needs key %q of Secret %s, which deploy/postgres/secret.example.yaml does not show", e.Name, r.Key, r.Name)
			}
		}
	}
	dsn := s.StringData[ref.Key]
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		t.Fatalf("secret.example.yaml %s = %q: want a postgres:// URL", ref.Key, dsn)
	}
	poolCfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("secret.example.yaml %s: %v", ref.Key, err)
	}
	u, err := url.Parse(dsn)
	if err != nil || !u.Query().Has("pool_max_conns") {
		t.Errorf("secret.example.yaml %s: set pool_max_conns; pgx's default is the node's CPU count, whatever the pod's share of it", ref.Key)
	}

	// At the HPA's largest, with a rollout's surge on top, the pools fit a database that
	// nobody tuned.
	var hpa struct {
		Spec struct {
			MaxReplicas int `yaml:"maxReplicas"`
		}
	}
	k.one(t, "HorizontalPodAutoscaler", "agentd").decode(t, &hpa)
	pods := hpa.Spec.MaxReplicas + surge(t, d.Spec.Strategy.RollingUpdate.MaxSurge, hpa.Spec.MaxReplicas)
	if conns := pods * (int(poolCfg.MaxConns) + postgresListenConnections); conns > postgresMaxConnections-postgresReservedConnections {
		t.Errorf("%d pods (the HPA's maxReplicas and a rollout's surge) x (pool_max_conns %d + %d) = %d connections, more than PostgreSQL serves by default (%d, %d of them for superusers); lower pool_max_conns in secret.example.yaml, or say in deploy/README.md what max_connections to set and raise it here",
			pods, poolCfg.MaxConns, postgresListenConnections, conns, postgresMaxConnections, postgresReservedConnections)
	}

	// Any replica serves any run, but clients still dial the base's Services: the ClusterIP
	// one, or the headless one to spread their new runs over the replicas without a mesh.
	for _, o := range base.all("Service") {
		if !slices.ContainsFunc(k.all("Service"), func(p object) bool { return p.Metadata.Name == o.Metadata.Name }) {
			t.Errorf("deploy/postgres removes Service %s, which deploy/README.md tells clients or scrapers to dial", o.Metadata.Name)
		}
	}
}

// surge returns the pods a rolling update adds at most: maxSurge, a number or a percentage
// of replicas rounded up ("" is Kubernetes' default, 25%).
func surge(t *testing.T, maxSurge string, replicas int) int {
	t.Helper()
	if maxSurge == "" {
		maxSurge = "25%"
	}
	if pct, ok := strings.CutSuffix(maxSurge, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil {
			t.Fatalf("rollingUpdate.maxSurge %q", maxSurge)
		}
		return (replicas*n + 99) / 100
	}
	n, err := strconv.Atoi(maxSurge)
	if err != nil {
		t.Fatalf("rollingUpdate.maxSurge %q", maxSurge)
	}
	return n
}

// mergeEnv merges a patch's variables into a container's as a strategic merge patch does:
// by name, a patched variable replacing the base's, new ones first.
func mergeEnv(base, patch []envVar) []envVar {
	out := slices.Clone(patch)
	for _, e := range base {
		if !slices.ContainsFunc(patch, func(p envVar) bool { return p.Name == e.Name }) {
			out = append(out, e)
		}
	}
	return out
}

// parseContainerConfig parses the container's args and AGENTD_* variables as agentd does.
// Variables from a Secret or from the pod's fields get a stand-in value.
func parseContainerConfig(t *testing.T, c container) config {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.secretRef() != nil:
			env[e.Name] = "secret:" + e.secretRef().Key
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = podFields[e.ValueFrom.FieldRef.FieldPath]
		}
	}
	var stderr bytes.Buffer
	cfg, err := parseConfig(c.Args, func(k string) string { return env[k] }, &stderr)
	if err != nil {
		t.Fatalf("agentd refuses the Deployment's args %q and env: %v\n%s", c.Args, err, stderr.String())
	}
	return cfg
}

// podFields holds stand-ins for the pod fields the manifests read through the downward API.
var podFields = map[string]string{
	"metadata.name":      "agentd-7c9d8f6b5-x2k4q",
	"metadata.namespace": "default",
}

// agentdFlags returns the names of agentd's flags, as its usage lists them.
func agentdFlags(t *testing.T) []string {
	t.Helper()
	var usage bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("agentd -h: %v", err)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(usage.String(), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 10 {
		t.Fatalf("found only %d flags in agentd's usage:\n%s", len(flags), usage.String())
	}
	return flags
}

// startAgentdForProbes serves agentd's service with the demo agent on a loopback port, as
// the binary does, and returns its address.
func startAgentdForProbes(t *testing.T) string {
	t.Helper()
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() {
		gs.Stop()
		srv.close()
	})
	return lis.Addr().String()
}

func healthStatus(t *testing.T, addr, svc string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		t.Errorf("health check of %q: %v", svc, err)
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

// httpPort returns the port of --http-listen, or -1 when agentd serves no HTTP.
func httpPort(t *testing.T, cfg config) int {
	if cfg.httpListen == "" {
		return -1
	}
	return portOf(t, "--http-listen", cfg.httpListen)
}

// portOf returns the port of a listen address such as ":50051" or "0.0.0.0:4317".
func portOf(t *testing.T, what, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil || n <= 0 {
		t.Fatalf("%s %q: not a host:port address", what, addr)
	}
	return n
}

// goModVersion returns the Go version go.mod asks for, as "1.26".
func goModVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	return string(m[1])
}

// dockerInstruction is one instruction of the Dockerfile, continuation lines joined.
type dockerInstruction struct{ cmd, args string }

func dockerInstructions(t *testing.T) []dockerInstruction {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstruction
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

// dockerUser returns the numeric uid the image runs as, and its gid (-1 when USER
// names none).
func dockerUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	for _, in := range slices.Backward(dockerInstructions(t)) {
		if in.cmd == "USER" {
			u, g, hasGroup := strings.Cut(in.args, ":")
			uid, err := strconv.ParseInt(u, 10, 64)
			if err != nil {
				t.Fatalf("Dockerfile: USER %q: give a numeric uid, so that Kubernetes can check runAsNonRoot", in.args)
			}
			if !hasGroup {
				return uid, -1
			}
			gid, err := strconv.ParseInt(g, 10, 64)
			if err != nil {
				t.Fatalf("Dockerfile: USER %q: give a numeric gid", in.args)
			}
			return uid, gid
		}
	}
	t.Fatal("Dockerfile: no USER")
	return 0, 0
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// optional formats an optional number of a manifest.
func optional(n *int64) string {
	if n == nil {
		return "unset"
	}
	return strconv.FormatInt(*n, 10)
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The parts of the Kubernetes objects the test reads.

type deployment struct {
	Spec struct {
		Strategy struct {
			RollingUpdate struct {
				MaxSurge       string `yaml:"maxSurge"`
				MaxUnavailable string `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		}
		Template struct {
			Metadata struct {
				Labels      map[string]string
				Annotations map[string]string
			}
			Spec podSpec
		}
	}
}

type podSpec struct {
	TerminationGracePeriodSeconds int64 `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot       bool    `yaml:"runAsNonRoot"`
		RunAsUser          *int64  `yaml:"runAsUser"`
		RunAsGroup         *int64  `yaml:"runAsGroup"`
		FSGroup            *int64  `yaml:"fsGroup"`
		SupplementalGroups []int64 `yaml:"supplementalGroups"`
	} `yaml:"securityContext"`
	Containers []container
	Volumes    []podVolume
}

// podVolume is a volume of a pod.
type podVolume struct {
	Name      string
	ConfigMap *struct {
		Name        string
		DefaultMode *int64 `yaml:"defaultMode"`
		Items       []keyToPath
	} `yaml:"configMap"`
	Secret *struct {
		SecretName  string `yaml:"secretName"`
		DefaultMode *int64 `yaml:"defaultMode"`
		Items       []keyToPath
	}
}

// keyToPath is an item of a Secret or ConfigMap volume: the file at Path holds Key.
type keyToPath struct {
	Key, Path string
	Mode      *int64
}

func (s podSpec) container(t *testing.T, name string) container {
	t.Helper()
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return container{}
}

type container struct {
	Name  string
	Image string
	Args  []string
	Env   []envVar
	Ports []struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string
		Limits   map[string]string
	}
	SecurityContext struct {
		RunAsUser                *int64 `yaml:"runAsUser"`
		RunAsGroup               *int64 `yaml:"runAsGroup"`
		ReadOnlyRootFilesystem   bool   `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct{ Drop []string }
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type secretKeyRef struct {
	Name, Key string
	Optional  bool
}

// envVar is a container's environment variable.
type envVar struct {
	Name      string
	Value     string
	ValueFrom *struct {
		SecretKeyRef *secretKeyRef `yaml:"secretKeyRef"`
		FieldRef     *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

func (e envVar) secretRef() *secretKeyRef {
	if e.ValueFrom == nil {
		return nil
	}
	return e.ValueFrom.SecretKeyRef
}

type probe struct {
	GRPC *struct {
		Port    int
		Service string
	} `yaml:"grpc"`
	HTTPGet *struct {
		Path string
		Port yaml.Node
	} `yaml:"httpGet"`
}

type svc struct {
	Spec struct {
		Selector map[string]string
		Ports    []struct {
			Name        string
			Port        int
			TargetPort  yaml.Node `yaml:"targetPort"`
			AppProtocol string    `yaml:"appProtocol"`
		}
	}
}

// port returns the container port with the given name.
func (c container) port(t *testing.T, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, name)
	return 0
}

// resolvePort resolves a targetPort (a number or a port name; unset means def).
func (c container) resolvePort(t *testing.T, n yaml.Node, def int) int {
	t.Helper()
	if n.Kind == 0 {
		return def
	}
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	return c.port(t, n.Value)
}

// A kustomization, read as far as this test needs: its objects (those of the directories it
// builds on included, less those its patches delete with "$patch: delete"), the files of its
// generated ConfigMaps, and its patches. Other patches are not applied: the checks read them.
type kustomization struct {
	APIVersion         string `yaml:"apiVersion"`
	Kind               string `yaml:"kind"`
	Resources          []string
	ConfigMapGenerator []struct {
		Name  string
		Files []string
	} `yaml:"configMapGenerator"`
	Patches []struct{ Path string }
	Images  []kustomizeImage
	Labels  []struct {
		Pairs            map[string]string
		IncludeSelectors bool `yaml:"includeSelectors"`
	}

	objects    []object
	configMaps map[string]map[string]string // name: key: the file it comes from
}

// kustomizeImage sets the registry and tag of the image a container names.
type kustomizeImage struct {
	Name    string
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
}

// loadKustomization reads dir/kustomization.yaml strictly (a field this reader does not know
// fails the test, rather than being skipped) and everything it names. Every YAML file in dir
// must be named by it, except *.example.yaml.
func loadKustomization(t *testing.T, dir string) *kustomization {
	t.Helper()
	k := &kustomization{configMaps: map[string]map[string]string{}}
	f := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(k); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s: apiVersion %q kind %q", f, k.APIVersion, k.Kind)
	}
	used := map[string]bool{"kustomization.yaml": true}
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			sub := loadKustomization(t, p)
			k.objects = append(k.objects, sub.objects...)
			for name, files := range sub.configMaps {
				k.configMaps[name] = files
			}
			continue
		}
		used[r] = true
		k.objects = append(k.objects, loadObjects(t, p)...)
	}
	for _, g := range k.ConfigMapGenerator {
		files := map[string]string{}
		for _, spec := range g.Files {
			key, src, ok := strings.Cut(spec, "=")
			if !ok {
				key, src = path.Base(spec), spec
			}
			p := filepath.Join(dir, src)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: configMapGenerator %s: %v", f, g.Name, err)
			}
			used[src] = true
			files[key] = p
		}
		k.configMaps[g.Name] = files
	}
	for _, p := range k.Patches {
		used[p.Path] = true
		for _, o := range loadObjects(t, filepath.Join(dir, p.Path)) {
			var directive struct {
				Patch string `yaml:"$patch"`
			}
			o.decode(t, &directive)
			if directive.Patch != "delete" {
				continue
			}
			n := len(k.objects)
			k.objects = slices.DeleteFunc(k.objects, func(b object) bool {
				return b.Kind == o.Kind && b.Metadata.Name == o.Metadata.Name
			})
			if len(k.objects) == n {
				t.Errorf("%s: %s deletes %s %s, which is not among its resources", f, p.Path, o.Kind, o.Metadata.Name)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".yaml") && !used[n] && !strings.HasSuffix(n, ".example.yaml") {
			t.Errorf("%s: %s is in the folder but not in the kustomization", f, n)
		}
	}
	return k
}

// one returns the only object of the kind and name.
func (k *kustomization) one(t *testing.T, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range k.all(kind) {
		if o.Metadata.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q, found %d", kind, name, len(found))
	}
	return found[0]
}

func (k *kustomization) all(kind string) []object {
	var out []object
	for _, o := range k.objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// mount returns the volume mounted where the container sees file p, and p's path inside it.
func mount(t *testing.T, spec podSpec, c container, p string) (volume string, rel string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" && m.MountPath == p {
			return m.Name, m.SubPath
		}
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/"); ok && m.SubPath == "" {
			return m.Name, rel
		}
	}
	t.Fatalf("container %s: nothing is mounted at %s", c.Name, p)
	return "", ""
}

// mountedFile returns the file, in this repository, of the ConfigMap key the container sees
// at p.
func (k *kustomization) mountedFile(t *testing.T, spec podSpec, c container, p string) string {
	t.Helper()
	name, rel := mount(t, spec, c, p)
	for _, v := range spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.ConfigMap == nil {
			t.Fatalf("%s is on volume %s, which is not a ConfigMap", p, name)
		}
		files, ok := k.configMaps[v.ConfigMap.Name]
		if !ok {
			t.Fatalf("%s is in ConfigMap %s, which the kustomization does not generate", p, v.ConfigMap.Name)
		}
		src, ok := files[rel]
		if !ok {
			t.Fatalf("%s: ConfigMap %s has no key %q", p, v.ConfigMap.Name, rel)
		}
		return src
	}
	t.Fatalf("no volume %s", name)
	return ""
}

// mountedSecretKey returns the Secret key the container sees at p.
func (k *kustomization) mountedSecretKey(t *testing.T, spec podSpec, c container, p string) string {
	t.Helper()
	name, rel := mount(t, spec, c, p)
	for _, v := range spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.Secret == nil {
			t.Fatalf("%s is on volume %s, which is not a Secret", p, name)
		}
		if len(v.Secret.Items) == 0 {
			return rel
		}
		for _, it := range v.Secret.Items {
			if it.Path == rel {
				return it.Key
			}
		}
		t.Fatalf("%s: Secret volume %s has no item at %q", p, name, rel)
	}
	t.Fatalf("no volume %s", name)
	return ""
}

// object is one Kubernetes object of a manifest file.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct {
		Name        string
		Labels      map[string]string
		Annotations map[string]string
	}
	file string
	node *yaml.Node
}

func (o object) decode(t *testing.T, v any) {
	t.Helper()
	if err := o.node.Decode(v); err != nil {
		t.Fatalf("%s: %s %s: %v", o.file, o.Kind, o.Metadata.Name, err)
	}
}

// loadObjects reads the objects of a manifest file, one a YAML document.
func loadObjects(t *testing.T, file string) []object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		o := object{file: file, node: &n}
		if err := n.Decode(&o); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: an object without apiVersion, kind or metadata.name", file)
		}
		out = append(out, o)
	}
	return out
}

func decodeFile(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
