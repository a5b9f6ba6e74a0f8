"""The host side of the test cluster: Debian packages it needs, and the host state it must give back.

A kubelet, kube-proxy, containerd and the bridge CNI plugin change the machine: sysctls, iptables
chains, a bridge, mounts, `kubepods` cgroups, directories under /var and /run. `HostState.capture()`
records what is there before `up`; `restore()` after `down` removes what the cluster added (only
what is recognisably ours: KUBE-*/CNI-* chains, our bridge, mounts under our directories, `kubepods`
cgroups) and writes back sysctls that changed. `diff()` says what still differs, for tests, including
processes left running that name the cluster's directories.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("containerd", "runc", "containernetworking-plugins", "iptables", "conntrack", "mmdebstrap")
COMMANDS = {"containerd": "containerd", "runc": "runc", "iptables": "iptables", "conntrack": "conntrack",
            "mmdebstrap": "mmdebstrap"}
CNI_BIN_DIR = Path("/usr/lib/cni")

# sysctls the kubelet, kube-proxy and CNI plugins set (kubelet's "protect kernel defaults" list,
# kube-proxy's conntrack/route_localnet settings, forwarding for the bridge)
SYSCTLS = (
    "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv4.conf.all.route_localnet",
    "net.ipv6.conf.all.forwarding", "net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait", "net.netfilter.nf_conntrack_tcp_be_liberal",
)
# directories the components create at fixed paths (besides our own state dir)
FIXED_PATHS = (Path("/var/log/containers"), Path("/var/log/pods"), Path("/var/lib/cni"), Path("/run/netns"),
               Path("/var/run/kubernetes"), Path("/var/lib/kubelet"), Path("/etc/cni"), Path("/opt/cni"))
OUR_CHAIN = re.compile(r"^(KUBE-|CNI-)")
CGROUP_ROOT = Path("/sys/fs/cgroup")
IPTABLES_TABLES = ("filter", "nat", "mangle", "raw")


class HostError(RuntimeError):
    """The host lacks something the cluster needs (and we cannot install it)."""


def missing_packages() -> list[str]:
    missing = [pkg for pkg, cmd in COMMANDS.items() if shutil.which(cmd) is None]
    if not (CNI_BIN_DIR / "bridge").exists():
        missing.append("containernetworking-plugins")
    return missing


def ensure_packages(progress: object = None) -> list[str]:
    """apt-get install the cluster's Debian packages if any is missing; returns what was installed."""
    missing = missing_packages()
    if not missing:
        return []
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise HostError(f"missing {missing}; run as root on Debian (apt-get install {' '.join(PACKAGES)})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, check=False)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0 or missing_packages():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise HostError(f"apt-get install {' '.join(PACKAGES)} failed:\n{tail}")
    return missing


def read_sysctl(key: str) -> str | None:
    p = Path("/proc/sys") / key.replace(".", "/")
    try:
        return p.read_text().strip()
    except OSError:
        return None


def write_sysctl(key: str, value: str) -> bool:
    try:
        (Path("/proc/sys") / key.replace(".", "/")).write_text(value)
        return True
    except OSError:
        return False


def mounts() -> list[str]:
    """Mount points, in mount order (/proc/self/mountinfo field 5, octal escapes decoded)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        out.append(re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1), 8)), point))
    return out


def iptables_chains(binary: str) -> dict[str, set[str]]:
    """table -> chain names (empty when the binary is missing)."""
    if shutil.which(binary) is None:
        return {}
    chains: dict[str, set[str]] = {}
    for table in IPTABLES_TABLES:
        proc = subprocess.run([binary, "-w", "-t", table, "-S"], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            continue
        chains[table] = {ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith(("-N ", "-P "))}
    return chains


def links() -> set[str]:
    return set(os.listdir("/sys/class/net"))


def cgroup_dirs() -> set[str]:
    """Top-level cgroups named like the kubelet's (`kubepods*`) under every v1 controller and v2."""
    found: set[str] = set()
    if CGROUP_ROOT.exists():
        for ctrl in CGROUP_ROOT.iterdir():
            if ctrl.is_dir():
                found.update(str(p) for p in ctrl.glob("kubepods*"))
    return found


def cluster_processes(our_dirs: tuple[Path, ...]) -> list[str]:
    """Processes whose command line names one of the cluster's directories (etcd, the Kubernetes
    components, containerd and its shims all do): after `down` there must be none."""
    prefixes = tuple(str(d) for d in our_dirs)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            args = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:  # gone meanwhile
            continue
        if any(prefix in arg for arg in args for prefix in prefixes):
            found.append(f"process {proc.name}: {' '.join(args)[:160]}")
    return sorted(found)


@dataclass
class HostState:
    """What the host looked like; compared and restored after the cluster is gone."""

    sysctls: dict[str, str | None] = field(default_factory=dict)
    mounts: list[str] = field(default_factory=list)
    chains: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    cgroups: set[str] = field(default_factory=set)
    paths: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def capture(cls) -> HostState:
        return cls(
            sysctls={k: read_sysctl(k) for k in SYSCTLS},
            mounts=mounts(),
            chains={b: iptables_chains(b) for b in ("iptables", "ip6tables")},
            links=links(),
            cgroups=cgroup_dirs(),
            paths={str(p): p.exists() for p in FIXED_PATHS},
        )

    def to_json(self) -> dict[str, object]:
        return {"sysctls": self.sysctls, "mounts": self.mounts,
                "chains": {b: {t: sorted(c) for t, c in tables.items()} for b, tables in self.chains.items()},
                "links": sorted(self.links), "cgroups": sorted(self.cgroups), "paths": self.paths}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> HostState:
        chains = d.get("chains", {})
        assert isinstance(chains, dict)
        return cls(
            sysctls=dict(d.get("sysctls", {})),  # type: ignore[call-overload]
            mounts=list(d.get("mounts", [])),  # type: ignore[call-overload]
            chains={b: {t: set(c) for t, c in tables.items()} for b, tables in chains.items()},
            links=set(d.get("links", [])),  # type: ignore[call-overload]
            cgroups=set(d.get("cgroups", [])),  # type: ignore[call-overload]
            paths=dict(d.get("paths", {})),  # type: ignore[call-overload]
        )

    # ---- restoring ------------------------------------------------------------------------------
    def restore(self, our_dirs: tuple[Path, ...], bridge: str) -> list[str]:
        """Undo the cluster's host changes; returns what was done (for the log)."""
        done: list[str] = []
        done += self._unmount(our_dirs)
        done += self._remove_chains()
        if bridge in links() and bridge not in self.links:
            subprocess.run(["ip", "link", "delete", bridge], capture_output=True, check=False)
            done.append(f"deleted link {bridge}")
        done += self._remove_cgroups()
        for key, value in self.sysctls.items():
            now = read_sysctl(key)
            if value is not None and now is not None and now != value and write_sysctl(key, value):
                done.append(f"sysctl {key}: {now} -> {value}")
        for p, existed in self.paths.items():
            path = Path(p)
            if not existed and path.exists():
                self._unmount((path,))
                shutil.rmtree(path, ignore_errors=True)
                done.append(f"removed {p}")
        return done

    def _unmount(self, dirs: tuple[Path, ...]) -> list[str]:
        done = []
        before = set(self.mounts)
        prefixes = tuple(str(d.resolve()) if d.exists() else str(d) for d in dirs)
        for point in reversed(mounts()):  # children before parents
            if point in before or not point.startswith(prefixes):
                continue
            proc = subprocess.run(["umount", point], capture_output=True, check=False)
            if proc.returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)
            done.append(f"unmounted {point}")
        return done

    def _remove_chains(self) -> list[str]:
        done = []
        for binary in ("iptables", "ip6tables"):
            if shutil.which(binary) is None:
                continue
            before = self.chains.get(binary, {})
            for table in IPTABLES_TABLES:
                proc = subprocess.run([binary, "-w", "-t", table, "-S"], capture_output=True, text=True, check=False)
                if proc.returncode != 0:
                    continue
                ours = {ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("-N ")}
                ours = {c for c in ours if OUR_CHAIN.match(c) and c not in before.get(table, set())}
                if not ours:
                    continue
                # rules in any chain that jump to one of ours go first, then our chains themselves
                for ln in proc.stdout.splitlines():
                    parts = ln.split()
                    if parts[:1] == ["-A"] and parts[1] not in ours and _jumps_to(parts, ours):
                        subprocess.run([binary, "-w", "-t", table, "-D", *parts[1:]], capture_output=True,
                                       check=False)
                for chain in ours:
                    subprocess.run([binary, "-w", "-t", table, "-F", chain], capture_output=True, check=False)
                for chain in ours:
                    subprocess.run([binary, "-w", "-t", table, "-X", chain], capture_output=True, check=False)
                done.append(f"{binary} -t {table}: removed {len(ours)} chains")
        return done

    def _remove_cgroups(self) -> list[str]:
        done = []
        for top in sorted(cgroup_dirs() - self.cgroups):
            for d in sorted((p for p in Path(top).rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                _kill_and_rmdir(d)
            _kill_and_rmdir(Path(top))
            done.append(f"removed cgroup {top}")
        return done

    # ---- comparing ------------------------------------------------------------------------------
    def diff(self, our_dirs: tuple[Path, ...], bridge: str) -> list[str]:
        """What differs from the captured state in the areas the cluster touches (empty: restored)."""
        now = HostState.capture()
        out = [f"sysctl {k}: {self.sysctls[k]} -> {now.sysctls[k]}" for k in SYSCTLS
               if self.sysctls.get(k) != now.sysctls.get(k)]
        prefixes = tuple(str(d) for d in our_dirs)
        out += [f"mount {m}" for m in now.mounts if m not in self.mounts and m.startswith(prefixes)]
        for binary, tables in now.chains.items():
            for table, chains in tables.items():
                new = {c for c in chains - self.chains.get(binary, {}).get(table, set()) if OUR_CHAIN.match(c)}
                out += [f"{binary} -t {table} chain {c}" for c in sorted(new)]
        if bridge in now.links and bridge not in self.links:
            out.append(f"link {bridge}")
        out += [f"cgroup {c}" for c in sorted(now.cgroups - self.cgroups)]
        out += [f"path {p}" for p, existed in now.paths.items() if existed and not self.paths.get(p, False)]
        return out + cluster_processes(our_dirs)


def _jumps_to(rule: list[str], chains: set[str]) -> bool:
    for flag in ("-j", "-g"):
        if flag in rule:
            i = rule.index(flag)
            if i + 1 < len(rule) and rule[i + 1] in chains:
                return True
    return False


def _kill_and_rmdir(cg: Path) -> None:
    """Kill what is left in a cgroup (container processes whose shim is gone), then remove it."""
    procs = cg / "cgroup.procs"
    try:
        pids = [int(p) for p in procs.read_text().split()] if procs.exists() else []
    except OSError:
        pids = []
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    for _ in range(50):  # killed processes leave the cgroup a moment later
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
