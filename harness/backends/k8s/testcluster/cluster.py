"""Start and stop a one-node Kubernetes cluster on this machine (root, cgroup v1, no systemd).

Network plan (all addresses are the cluster's own):

- a bridge `benchk8s0` created before anything starts, with the gateway address 10.244.0.1 that the
  bridge CNI plugin then reuses for the pod subnet 10.244.0.0/24. The apiserver and the kubelet bind
  this address and the node registers it as its InternalIP, so the apiserver reaches the kubelet
  (logs, exec, port-forward) and pods reach the apiserver (Service 10.96.0.1) without any traffic on
  the machine's own interfaces; etcd and the components' health ports stay on 127.0.0.1;
- Services in 10.96.0.0/16 (kube-proxy, iptables mode); cluster DNS (CoreDNS, in a pod) at 10.96.0.10.

Processes are started detached (they outlive `bench k8s up`) with their pids in `cluster.json`;
`down` drains the pods through the API first (so the kubelet unmounts volumes and the CNI plugin
releases addresses), stops everything by pid and hands the host back (hostprep.HostState).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

from harness.backends.k8s.testcluster import addons
from harness.backends.k8s.testcluster.binaries import Binaries, BinaryBuilder
from harness.backends.k8s.testcluster.hostprep import CNI_BIN_DIR, HostState, ensure_packages
from harness.backends.k8s.testcluster.pins import Layout, Pins
from harness.backends.k8s.testcluster.pki import Identity, Pki

Progress = Callable[[str], None]

NODE = "bench-node"
BRIDGE = "benchk8s0"
GATEWAY = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
DNS_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
API_PORT = 6443
ETCD_CLIENT = "127.0.0.1:12379"
ETCD_PEER = "127.0.0.1:12380"
RUN_DIR = Path("/run/autoscaler-bench-k8s")
# directories whose new mounts are ours to undo (netns pins, containerd and kubelet volumes)
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped; the message names the component and its log."""


@dataclass
class Proc:
    name: str
    pid: int
    log: str


def _noop(_: str) -> None:
    pass


class TestCluster:
    """`up()` / `down()` / `status()` of the one-node cluster described by `layout` and `pins`."""

    __test__ = False  # not a pytest class

    def __init__(self, layout: Layout | None = None, pins: Pins | None = None,
                 progress: Progress | None = None) -> None:
        self.layout = layout or Layout()
        self.pins = pins or Pins()
        self.progress = progress or _noop
        self.state = self.layout.state_dir
        self.logs = self.state / "logs"
        self.pki_dir = self.state / "pki"
        self.containerd_root = self.layout.cache_dir / "containerd"
        self.timings: dict[str, float] = {}

    # ---- paths ------------------------------------------------------------------------------------
    @property
    def info_file(self) -> Path:
        return self.state / "cluster.json"

    @property
    def host_file(self) -> Path:
        return self.state / "host-before.json"

    @property
    def containerd_sock(self) -> Path:
        return RUN_DIR / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        """Where the kubelet writes container logs (read these: `logs` needs no apiserver->kubelet call)."""
        return self.state / "pod-logs"

    @property
    def server(self) -> str:
        return f"https://{GATEWAY}:{API_PORT}"

    def our_dirs(self) -> tuple[Path, ...]:
        return (self.state, RUN_DIR, self.containerd_root, Path("/run/netns"), Path("/var/run/netns"),
                Path("/run/containerd"), Path("/var/lib/kubelet"))

    # ---- status ------------------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.info_file.read_text()))
        except (OSError, ValueError):
            return {}

    def procs(self) -> list[Proc]:
        return [Proc(**p) for p in self.info().get("procs", [])]

    def alive(self) -> dict[str, bool]:
        return {p.name: _alive(p.pid) for p in self.procs()}

    def is_up(self) -> bool:
        alive = self.alive()
        return bool(alive) and all(alive.values()) and self._api_ready()

    # ---- up ----------------------------------------------------------------------------------------
    def up(self, binaries: Binaries | None = None, images: dict[str, Path] | None = None) -> dict[str, Any]:
        """Bring the cluster up (idempotent); returns cluster.json's content."""
        if os.geteuid() != 0:
            raise ClusterError("the test cluster needs root (kubelet, containerd, iptables)")
        if self.is_up():
            self.progress("test cluster already up")
            if images:
                self.import_images(images)
            return self.info()
        if self.procs():  # a half-started or crashed cluster: clean it first
            self.progress("a previous cluster left processes/state behind: tearing it down first")
            self.down()
        t0 = time.monotonic()
        ensure_packages()
        bins = binaries or BinaryBuilder(self.pins, self.layout, self.progress).cached()
        if bins is None:
            raise ClusterError("Kubernetes binaries are not built yet: run `bench k8s build` (or `make k8s-build`)")
        self.state.mkdir(parents=True, exist_ok=True)
        if not self.host_file.exists():  # never overwrite the pristine record with a changed host
            self.host_file.write_text(json.dumps(HostState.capture().to_json(), indent=1))
        for d in (self.logs, RUN_DIR, self.pod_logs, self.containerd_root):
            d.mkdir(parents=True, exist_ok=True)
        procs: list[Proc] = []
        try:
            self._network()
            pki = self._pki()
            self._write_configs(pki, self.image_ref(images or {}, "pause", addons.DEFAULT_PAUSE_IMAGE))
            procs.append(self._start("containerd", ["--config", str(self.state / "containerd.toml")], bins,
                                     system=True))
            procs.append(self._start("etcd", self._etcd_args(), bins))
            self._save(procs)
            self._wait(lambda: _http_ok(f"http://{ETCD_CLIENT}/health"), 30, "etcd", "etcd")
            self.timings["etcd_s"] = time.monotonic() - t0
            procs.append(self._start("kube-apiserver", self._apiserver_args(), bins))
            self._save(procs)
            self._wait(self._api_ready, 60, "kube-apiserver /readyz", "kube-apiserver")
            self.timings["apiserver_s"] = time.monotonic() - t0
            procs.append(self._start("kube-controller-manager", self._kcm_args(), bins))
            procs.append(self._start("kube-scheduler", self._scheduler_args(), bins))
            self._wait(lambda: self.containerd_sock.exists(), 30, "containerd socket", "containerd")
            procs.append(self._start("kubelet", self._kubelet_args(), bins))
            procs.append(self._start("kube-proxy", ["--config", str(self.state / "kube-proxy.yaml")], bins))
            self._save(procs)
            api = addons.admin_client(self.layout.kubeconfig)
            self._wait(lambda: addons.node_ready(api, NODE), 90, f"node {NODE} Ready", "kubelet")
            self.timings["node_ready_s"] = time.monotonic() - t0
            t_img = time.monotonic()
            self.import_images(images or {})  # once per machine: containerd's root is in the cache dir
            self.timings["image_import_s"] = time.monotonic() - t_img
            dns_image = self.image_ref(images or {}, "coredns", addons.DEFAULT_COREDNS_IMAGE)
            addons.apply_all(api, addons.coredns(dns_image, DNS_IP, CLUSTER_DOMAIN))
            addons.apply_all(api, addons.harness_rbac())
            addons.write_harness_kubeconfig(api, pki, self.server, self.layout.harness_kubeconfig)
            self._wait(lambda: addons.deployment_ready(api, "kube-system", "coredns"), 120, "CoreDNS ready",
                       "kubelet")
            self.timings["dns_ready_s"] = time.monotonic() - t0
        except BaseException:
            self._save(procs)
            raise
        self._save(procs, ready=True)
        self.progress(f"test cluster up in {time.monotonic() - t0:.1f} s ({self.server})")
        return self.info()

    @staticmethod
    def image_ref(images: dict[str, Path], name: str, default: str) -> str:
        """The reference of our image `name` (e.g. `.../pause:<digest>`), else an upstream default."""
        return next((ref for ref in images if ref.rsplit(":", 1)[0].endswith(f"/{name}")), default)

    def import_images(self, images: dict[str, Path]) -> list[str]:
        """`ctr images import` each OCI archive whose reference is not in containerd yet."""
        if not images:
            return []
        have = set(self.ctr("images", "ls", "-q").split())
        done = []
        for ref, archive in images.items():
            if ref in have:
                continue
            t = time.monotonic()
            self.ctr("images", "import", "--no-unpack=false", "--snapshotter", "overlayfs", str(archive))
            self.progress(f"imported {ref} ({time.monotonic() - t:.1f} s)")
            done.append(ref)
        return done

    def ctr(self, *args: str) -> str:
        proc = subprocess.run(["ctr", "--address", str(self.containerd_sock), "--namespace", "k8s.io", *args],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ClusterError(f"ctr {' '.join(args)}: {proc.stderr.strip()[-400:]}")
        return proc.stdout

    # ---- down --------------------------------------------------------------------------------------
    def down(self) -> list[str]:
        """Stop everything and give the host back; returns the restore actions (also in the log)."""
        t0 = time.monotonic()
        procs = {p.name: p for p in self.procs()}
        if procs.get("kube-apiserver") and _alive(procs["kube-apiserver"].pid) and self._api_ready():
            try:
                addons.drain(addons.admin_client(self.layout.kubeconfig), SYSTEM_NAMESPACES, timeout_s=90,
                             progress=self.progress)
            except Exception as exc:  # noqa: BLE001 - a failed drain is cleaned below, by force
                self.progress(f"drain failed ({type(exc).__name__}: {exc}); removing containers by force")
        for name in ("kube-proxy", "kubelet", "kube-scheduler", "kube-controller-manager"):
            if name in procs:
                _stop(procs[name].pid)
        bins = BinaryBuilder(self.pins, self.layout).binaries()
        if bins.path("kube-proxy").exists():  # kube-proxy removes its own iptables rules
            subprocess.run([str(bins.path("kube-proxy")), "--cleanup"], capture_output=True, check=False)
        if "containerd" in procs and _alive(procs["containerd"].pid):
            self._remove_containers()
        for name in ("kube-apiserver", "etcd", "containerd"):
            if name in procs:
                _stop(procs[name].pid)
        self._kill_shims()
        actions: list[str] = []
        if self.host_file.exists():
            before = HostState.from_json(json.loads(self.host_file.read_text()))
            actions = before.restore(self.our_dirs(), BRIDGE)
        else:
            subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)
        last = self.layout.cache_dir / "last-logs"
        if self.logs.exists():
            shutil.rmtree(last, ignore_errors=True)
            shutil.copytree(self.logs, last, dirs_exist_ok=True)
        for d in (self.state, RUN_DIR):
            shutil.rmtree(d, ignore_errors=True)
        self.progress(f"test cluster down in {time.monotonic() - t0:.1f} s; host restored "
                      f"({len(actions)} actions; last logs in {last})")
        return actions

    def _remove_containers(self) -> None:
        """Whatever the drain left: kill tasks, delete containers (sandboxes too) - images stay cached."""
        try:
            for line in self.ctr("tasks", "ls").splitlines()[1:]:
                cid = line.split()[0]
                subprocess.run(["ctr", "--address", str(self.containerd_sock), "-n", "k8s.io", "tasks", "kill", "-s",
                                "SIGKILL", cid], capture_output=True, check=False)
            time.sleep(1)
            for line in self.ctr("tasks", "ls").splitlines()[1:]:
                self.ctr("tasks", "delete", "-f", line.split()[0])
            ids = self.ctr("containers", "ls", "-q").split()
            if ids:
                self.ctr("containers", "rm", *ids)
        except ClusterError as exc:
            self.progress(f"container cleanup: {exc}")

    def _kill_shims(self) -> None:
        """containerd-shim processes of our containerd (they outlive it by design)."""
        needle = str(self.containerd_sock).encode()
        for pid_dir in Path("/proc").iterdir():
            if not pid_dir.name.isdigit():
                continue
            try:
                cmd = (pid_dir / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmd and needle in cmd:
                _stop(int(pid_dir.name))

    # ---- pieces of up ------------------------------------------------------------------------------
    def _network(self) -> None:
        """Our bridge with the gateway address, before the apiserver binds it (the CNI plugin reuses it)."""
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            _sh(["ip", "link", "add", BRIDGE, "type", "bridge"])
        addrs = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], capture_output=True, text=True,
                               check=False).stdout
        if f" {GATEWAY}/" not in addrs:
            _sh(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE])
        _sh(["ip", "link", "set", BRIDGE, "up"])
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1")  # pods <-> host routing (restored on down)

    def _pki(self) -> Pki:
        pki = Pki(self.pki_dir)
        pki.issue("apiserver", "kube-apiserver", server=True,
                  dns=("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       f"kubernetes.default.svc.{CLUSTER_DOMAIN}", "localhost"),
                  ips=(GATEWAY, API_SERVICE_IP, "127.0.0.1"))
        pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",), client=True)
        pki.issue("kubelet-serving", f"system:node:{NODE}", ("system:nodes",), server=True, dns=(NODE,),
                  ips=(GATEWAY,))
        pki.service_account_keys()
        for name, ident in (("admin", Identity("admin-client", "bench-admin", ("system:masters",))),
                            ("controller-manager", Identity("kcm-client", "system:kube-controller-manager")),
                            ("scheduler", Identity("scheduler-client", "system:kube-scheduler")),
                            ("kubelet", Identity("kubelet-client", f"system:node:{NODE}", ("system:nodes",))),
                            ("kube-proxy", Identity("proxy-client", "system:kube-proxy"))):
            pki.kubeconfig(name, self.server, ident)
        shutil.copy(pki.path("admin.kubeconfig"), self.layout.kubeconfig)
        self.layout.kubeconfig.chmod(0o600)
        return pki

    def _write_configs(self, pki: Pki, pause_image: str) -> None:
        s = self.state
        (s / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        (s / "cni" / "ipam").mkdir(parents=True, exist_ok=True)
        (s / "cni" / "net.d" / "10-bench.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "bench",
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                # pods reach each other on the bridge and Services through the node; no default route,
                # so nothing a pod sends can leave the machine
                "ipam": {"type": "host-local", "dataDir": str(s / "cni" / "ipam"),
                         "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                         "routes": [{"dst": SERVICE_CIDR}]},
            }],
        }, indent=1))
        (s / "containerd.toml").write_text(containerd_config(self, pause_image))
        (s / "resolv.conf").write_text("# pods resolve only cluster names (no upstream DNS)\n")
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": GATEWAY, "port": 10250, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(pki.path("ca.crt"))}},
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(pki.path("kubelet-serving.crt")),
            "tlsPrivateKeyFile": str(pki.path("kubelet-serving.key")),
            "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
            "clusterDNS": [DNS_IP], "clusterDomain": CLUSTER_DOMAIN, "resolvConf": str(s / "resolv.conf"),
            "podLogsDir": str(self.pod_logs),
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,  # images cannot be re-pulled
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "maxPods": 110, "serializeImagePulls": False, "registerNode": True,
            "volumeStatsAggPeriod": "0s",
            "nodeStatusReportFrequency": "10s", "nodeStatusUpdateFrequency": "5s",
            "syncFrequency": "10s", "fileCheckFrequency": "10s",
        }
        (s / "kubelet.yaml").write_text(yaml.safe_dump(kubelet, sort_keys=False))
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(pki.path("kube-proxy.kubeconfig"))},
            "mode": "iptables", "clusterCIDR": POD_CIDR, "hostnameOverride": NODE,
            "bindAddress": "127.0.0.1", "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249", "nodePortAddresses": [f"{GATEWAY}/32"],
            "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
            # 0 leaves the host's conntrack sysctls as they are
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }
        (s / "kube-proxy.yaml").write_text(yaml.safe_dump(proxy, sort_keys=False))

    def _etcd_args(self) -> list[str]:
        d = self.state / "etcd"
        return ["--name", "bench", "--data-dir", str(d), "--listen-client-urls", f"http://{ETCD_CLIENT}",
                "--advertise-client-urls", f"http://{ETCD_CLIENT}", "--listen-peer-urls", f"http://{ETCD_PEER}",
                "--initial-advertise-peer-urls", f"http://{ETCD_PEER}", "--initial-cluster",
                f"bench=http://{ETCD_PEER}", "--listen-metrics-urls", "http://127.0.0.1:12381",
                "--quota-backend-bytes", str(2 << 30), "--log-level", "warn"]

    def _apiserver_args(self) -> list[str]:
        p = self.pki_dir
        return [
            f"--etcd-servers=http://{ETCD_CLIENT}", f"--bind-address={GATEWAY}", f"--advertise-address={GATEWAY}",
            f"--secure-port={API_PORT}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", f"--client-ca-file={p / 'ca.crt'}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={p / 'ca.crt'}", "--kubelet-preferred-address-types=InternalIP",
            f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--enable-admission-plugins=NodeRestriction", "--profiling=false", "--v=1",
            f"--cert-dir={self.state / 'apiserver-certs'}",
        ]

    def _kcm_args(self) -> list[str]:
        p = self.pki_dir
        kc = str(p / "controller-manager.kubeconfig")
        return [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
                f"--service-account-private-key-file={p / 'sa.key'}", f"--root-ca-file={p / 'ca.crt'}",
                f"--cluster-signing-cert-file={p / 'ca.crt'}", f"--cluster-signing-key-file={p / 'ca.key'}",
                "--concurrent-deployment-syncs=5", "--profiling=false", "--v=1"]

    def _scheduler_args(self) -> list[str]:
        kc = str(self.pki_dir / "scheduler.kubeconfig")
        return [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"]

    def _kubelet_args(self) -> list[str]:
        return ["--config", str(self.state / "kubelet.yaml"), "--kubeconfig",
                str(self.pki_dir / "kubelet.kubeconfig"), "--hostname-override", NODE, "--node-ip", GATEWAY,
                "--root-dir", str(self.state / "kubelet"), "--v=1"]

    def _start(self, name: str, args: list[str], bins: Binaries, system: bool = False) -> Proc:
        exe = shutil.which(name) if system else str(bins.path(name))
        if not exe:
            raise ClusterError(f"{name} not found")
        log = self.logs / f"{name}.log"
        env = dict(os.environ, PATH=f"{bins.bin_dir}:{os.environ.get('PATH', '')}")
        with log.open("ab") as fh:
            proc = subprocess.Popen([exe, *args], stdin=subprocess.DEVNULL,
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                    cwd=self.state)
        self.progress(f"started {name} (pid {proc.pid})")
        return Proc(name, proc.pid, str(log))

    def _save(self, procs: list[Proc], ready: bool = False) -> None:
        info = {"procs": [p.__dict__ for p in procs], "ready": ready, "server": self.server,
                "kubeconfig": str(self.layout.kubeconfig), "harness_kubeconfig": str(self.layout.harness_kubeconfig),
                "pod_logs": str(self.pod_logs), "node": NODE, "versions": self.pins.model_dump(),
                "timings": self.timings}
        self.info_file.write_text(json.dumps(info, indent=1))

    def _api_ready(self) -> bool:
        p = self.pki_dir
        try:
            r = requests.get(f"{self.server}/readyz", timeout=2, verify=str(p / "ca.crt"),
                             cert=(str(p / "admin-client.crt"), str(p / "admin-client.key")))
            return r.status_code == 200
        except (requests.RequestException, OSError):
            return False

    def _wait(self, check: Callable[[], bool], timeout_s: float, what: str, component: str) -> None:
        t0 = time.monotonic()
        while not check():
            proc = next((p for p in self.procs() if p.name == component), None)
            if proc is not None and not _alive(proc.pid):
                raise ClusterError(f"{component} exited while waiting for {what}:\n{_tail(Path(proc.log))}")
            if time.monotonic() - t0 > timeout_s:
                log = self.logs / f"{component}.log"
                raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}:\n{_tail(log)}")
            time.sleep(0.25)


def containerd_config(c: TestCluster, pause_image: str) -> str:
    """containerd 1.6 (config v2) of our own: own socket, state and root; CRI with the bridge CNI.

    `restrict_oom_score_adj`: root here lacks CAP_SYS_RESOURCE, so lowering the pause container's
    oom_score_adj fails and every sandbox dies without it (K8S-ON-ONE-MACHINE.md).
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
# generated by harness.backends.k8s.testcluster.cluster
version = 2
root = "{c.containerd_root}"
state = "{RUN_DIR / 'containerd'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{c.containerd_sock}"

[ttrpc]
  address = "{RUN_DIR / 'containerd.sock.ttrpc'}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{c.state / 'containerd-opt'}"

[{cri}]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  enable_selinux = false
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{c.state / 'cni' / 'net.d'}"
  max_conf_num = 1
"""


def _sh(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _stop(pid: int, timeout_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `timeout_s`; reaps it if it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t0 = time.monotonic()
    while _alive(pid) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.1)
        _reap(pid)
    if _alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _http_ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {log})"
