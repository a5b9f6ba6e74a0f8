"""Container images for the k8s backend, built locally from Debian packages and the harness' artifacts.

No registry and no Docker: a root filesystem from Debian's packages (`mmdebstrap`: a minimal
bookworm with openjdk-17-jre-headless, Debian's prometheus and catatonit) is the shared base layer;
thin layers on top add what the local backend already installs - the Flink distribution from the
pyflink wheels (with its Prometheus reporter plugin), the Kafka broker jars from Maven Central, the
job jar built from `queries/` - and the CoreDNS binary built by `binaries`. All images go into one
OCI image-layout archive (shared blobs stored once) that `ctr images import` loads into containerd.

Reproducible and cached: layers are written with fixed metadata (mtime = SOURCE_DATE_EPOCH, uid 0,
sorted entries), so equal inputs give equal digests; an image's tag is its manifest digest, and
the archive is rebuilt only when an input changed. The base root filesystem is kept per package
list and suite.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends.k8s.testcluster.pins import Layout, Pins

Progress = Callable[[str], None]

SOURCE_DATE_EPOCH = 1735689600  # 2025-01-01: fixed file times in our layers
BASE_PACKAGES = ("openjdk-17-jre-headless", "prometheus", "catatonit", "procps", "netbase", "ca-certificates")
REPO_PREFIX = "localhost/autoscaler-bench"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
FLINK_DIRS = ("bin", "conf", "lib", "plugins/metrics-prometheus")
JAR_IN_IMAGE = "/opt/flink/usrlib/nexmark-queries.jar"

# The Flink image's entrypoint: the same verbs as the official image (`standalone-job`, `jobmanager`,
# `taskmanager`), so the k8s manifests work with either. The config map is mounted read-only at
# /opt/flink/conf; Flink's scripts only read it.
FLINK_ENTRYPOINT = """\
#!/bin/bash
# autoscaler-bench Flink image entrypoint
set -e
export FLINK_HOME=/opt/flink
cmd="${1:-help}"
case "$cmd" in
  standalone-job) shift; exec "$FLINK_HOME/bin/standalone-job.sh" start-foreground "$@" ;;
  jobmanager)     shift; exec "$FLINK_HOME/bin/jobmanager.sh" start-foreground "$@" ;;
  taskmanager)    shift; exec "$FLINK_HOME/bin/taskmanager.sh" start-foreground "$@" ;;
  *)              exec "$@" ;;
esac
"""

# The Kafka image follows the apache/kafka image's conventions the manifests rely on: KAFKA_* env
# variables become server.properties keys (KAFKA_FOO_BAR -> foo.bar), CLUSTER_ID formats the KRaft
# storage once, /etc/kafka/docker/run starts the broker, /opt/kafka/bin/kafka-topics.sh exists.
KAFKA_RUN = """\
#!/bin/bash
# autoscaler-bench Kafka image: env -> server.properties, format storage once, start the broker
set -e
conf=/opt/kafka/config/server.properties
mkdir -p /opt/kafka/config
: > "$conf"
skip=" KAFKA_HEAP_OPTS KAFKA_OPTS KAFKA_JVM_PERFORMANCE_OPTS KAFKA_LOG4J_OPTS KAFKA_VERSION "
while IFS='=' read -r name value; do
  case "$name" in KAFKA_*) ;; *) continue ;; esac
  case "$skip" in *" $name "*) continue ;; esac
  key=$(echo "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' | tr '_' '.')
  echo "$key=$value" >> "$conf"
done < <(env)
dir=$(sed -n 's/^log.dirs=//p' "$conf")
mkdir -p "${dir:-/tmp/kraft-logs}"
cp=/opt/kafka/libs/*
java -Xmx256m -cp "$cp" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$conf" --ignore-formatted
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \\
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -cp "$cp" kafka.Kafka "$conf"
"""

KAFKA_TOPICS = """\
#!/bin/bash
exec java -Xmx256m -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \\
  -cp '/opt/kafka/tools/*' org.apache.kafka.tools.TopicCommand "$@"
"""

KAFKA_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.org.name = org.apache.kafka
logger.org.level = WARN
"""


class ImageError(RuntimeError):
    """An image could not be built (mmdebstrap, a missing artifact)."""


@dataclass
class Layer:
    """One uncompressed layer: its file and digests (for uncompressed layers diff_id == digest)."""

    path: Path
    digest: str
    size: int


@dataclass
class ImageSpec:
    name: str
    layers: list[Layer]
    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"


@dataclass(frozen=True)
class BuiltImages:
    """Image references (name -> ref) and the archive that holds them all."""

    refs: dict[str, str]
    archive: Path

    def for_cluster(self) -> dict[str, Path]:
        return {ref: self.archive for ref in self.refs.values()}


def _noop(_: str) -> None:
    pass


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ImageBuilder:
    """Builds the base root filesystem, the layers and the OCI archive; all cached under `image_root`."""

    def __init__(self, pins: Pins | None = None, layout: Layout | None = None, progress: Progress | None = None
                 ) -> None:
        self.pins = pins or Pins()
        self.layout = layout or Layout()
        self.progress = progress or _noop
        self.root = self.layout.image_root
        self.root.mkdir(parents=True, exist_ok=True)

    # ---- the base ------------------------------------------------------------------------------
    def base_rootfs(self) -> Layer:
        """mmdebstrap a minimal Debian with the JRE, Prometheus and catatonit (cached per package list)."""
        key = self.pins.key(self.pins.debian_suite, *BASE_PACKAGES)
        out = self.root / f"rootfs-{self.pins.debian_suite}-{key}.tar"
        with open(self.root / ".rootfs.lock", "w") as lock:  # a background `prepare` may be at it
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not out.exists():
                self._mmdebstrap(out)
        return self._layer(out)

    def _mmdebstrap(self, out: Path) -> None:
        if shutil.which("mmdebstrap") is None:
            raise ImageError("mmdebstrap missing: apt-get install mmdebstrap")
        self.progress(f"mmdebstrap {self.pins.debian_suite} + {', '.join(BASE_PACKAGES)} (one-time, ~2 min)")
        tmp = out.with_suffix(".part.tar")
        cmd = ["mmdebstrap", "--mode=root", "--variant=apt", "--format=tar", "--skip=output/dev",
               f"--include={','.join(BASE_PACKAGES)}",
               "--aptopt=APT::Install-Recommends \"false\"",
               "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
               "--dpkgopt=path-exclude=/usr/share/locale/*",
               # the JRE's postinst registers man pages with update-alternatives: the directory must exist
               "--essential-hook=mkdir -p \"$1\"/usr/share/man/man1",
               "--customize-hook=rm -rf \"$1\"/var/cache/apt/* \"$1\"/var/lib/apt/lists/*",
               self.pins.debian_suite, str(tmp), *self._mirrors()]
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(SOURCE_DATE_EPOCH))
        log = out.with_suffix(".log")
        with log.open("w") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            errors = [ln for ln in log.read_text(errors="replace").splitlines() if "rror" in ln][-10:]
            raise ImageError(f"mmdebstrap failed (exit {proc.returncode}; log {log}):\n" + "\n".join(errors))
        os.replace(tmp, out)

    @staticmethod
    def _mirrors() -> list[str]:
        """The host's own apt sources (the Debian mirror this machine is allowed to use)."""
        files = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + sorted(
            Path("/etc/apt/sources.list.d").glob("*.list"))
        main = Path("/etc/apt/sources.list")
        if main.exists() and main.read_text().strip():
            files.insert(0, main)
        return [str(f) for f in files]

    def _layer(self, path: Path) -> Layer:
        digest_file = path.with_name(path.name + ".sha256")
        if digest_file.exists() and digest_file.stat().st_mtime >= path.stat().st_mtime:
            digest = digest_file.read_text().strip()
        else:
            digest = sha256_file(path)
            digest_file.write_text(digest)
        return Layer(path, f"sha256:{digest}", path.stat().st_size)

    # ---- our layers ----------------------------------------------------------------------------
    def layer_from(self, name: str, entries: Iterable[tuple[str, Path | bytes, int]]) -> Layer:
        """A deterministic tar of (path in image, source file or content, mode); cached by digest.

        A fingerprint of the inputs (paths, sizes, mtimes, inline contents) finds an existing layer
        without re-reading hundreds of MB on every `bench k8s up`."""
        entries = sorted(entries, key=lambda e: e[0])
        fp = hashlib.sha256()
        for arc, src, mode in entries:
            if isinstance(src, bytes):
                fp.update(f"{arc}|{mode}|".encode() + hashlib.sha256(src).digest())
            else:
                st = src.stat()
                fp.update(f"{arc}|{mode}|{src}|{st.st_size}|{st.st_mtime_ns}".encode())
        index = self.root / f"layer-{name}.{fp.hexdigest()[:24]}.ref"
        if index.exists():
            cached = Path(index.read_text().strip())
            if cached.exists():
                return self._layer(cached)
        layer = self._write_layer(name, entries)
        index.write_text(str(layer.path))
        return layer

    def _write_layer(self, name: str, entries: list[tuple[str, Path | bytes, int]]) -> Layer:
        buf = self.root / f"layer-{name}.{os.getpid()}.tmp"
        with tarfile.open(buf, "w", format=tarfile.GNU_FORMAT) as tar:
            dirs_done: set[str] = set()
            for arc, src, mode in entries:
                arc = arc.lstrip("/")
                parts = arc.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs_done:
                        dirs_done.add(d)
                        tar.addfile(_info(d, tarfile.DIRTYPE, 0o755))
                data = src if isinstance(src, bytes) else src.read_bytes()
                info = _info(arc, tarfile.REGTYPE, mode)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        digest = sha256_file(buf)
        out = self.root / f"layer-{name}-{digest[:16]}.tar"
        os.replace(buf, out)
        (out.with_name(out.name + ".sha256")).write_text(digest)
        return Layer(out, f"sha256:{digest}", out.stat().st_size)

    def flink_layer(self, flink_home: Path) -> Layer:
        files: list[tuple[str, Path | bytes, int]] = [("/docker-entrypoint.sh", FLINK_ENTRYPOINT.encode(), 0o755)]
        for sub in FLINK_DIRS:
            for f in sorted((flink_home / sub).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts:
                    rel = f.relative_to(flink_home)
                    files.append((f"/opt/flink/{rel}", f, 0o755 if rel.parts[0] == "bin" else 0o644))
        files.append(("/opt/flink/log/.keep", b"", 0o644))
        return self.layer_from("flink", files)

    def jar_layer(self, jar: Path) -> Layer:
        return self.layer_from("jobjar", [(JAR_IN_IMAGE, jar, 0o644)])

    def kafka_layer(self, broker_jars: Path, tools_jars: Path) -> Layer:
        """The broker's jars in libs/, kafka-tools (TopicCommand, with its own dependency versions) in tools/."""
        files: list[tuple[str, Path | bytes, int]] = [
            ("/etc/kafka/docker/run", KAFKA_RUN.encode(), 0o755),
            ("/opt/kafka/bin/kafka-topics.sh", KAFKA_TOPICS.encode(), 0o755),
            ("/opt/kafka/config/log4j2.properties", KAFKA_LOG4J2.encode(), 0o644),
        ]
        files += [(f"/opt/kafka/libs/{jar.name}", jar, 0o644) for jar in sorted(broker_jars.glob("*.jar"))]
        files += [(f"/opt/kafka/tools/{jar.name}", jar, 0o644) for jar in sorted(tools_jars.glob("*.jar"))]
        return self.layer_from("kafka", files)

    def binary_layer(self, name: str, binary: Path) -> Layer:
        return self.layer_from(name, [(f"/usr/local/bin/{name}", binary.resolve(), 0o755)])

    # ---- images and the archive ------------------------------------------------------------------
    def build(self, flink_home: Path, kafka_jar_dirs: tuple[Path, Path], jar: Path, coredns: Path) -> BuiltImages:
        """All images of the stack, in one OCI archive (reused when nothing changed)."""
        base = self.base_rootfs()
        jarl = self.jar_layer(jar)
        java_env = {"PATH": "/opt/flink/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "JAVA_HOME": "/usr/lib/jvm/java-17-openjdk-amd64", "FLINK_HOME": "/opt/flink"}
        specs = [
            ImageSpec("flink", [base, self.flink_layer(flink_home), jarl], ["/docker-entrypoint.sh"], env=java_env,
                      workdir="/opt/flink"),
            ImageSpec("generator", [base, jarl], ["java"], env=java_env),
            ImageSpec("kafka", [base, self.kafka_layer(*kafka_jar_dirs)], ["/etc/kafka/docker/run"], env=java_env,
                      workdir="/opt/kafka"),
            ImageSpec("prometheus", [base], ["/usr/bin/prometheus"], workdir="/prometheus"),
            ImageSpec("coredns", [base, self.binary_layer("coredns", coredns)], ["/usr/local/bin/coredns"]),
            ImageSpec("pause", [base], ["/usr/bin/catatonit", "-P"]),
        ]
        return self.write_archive(specs)

    def write_archive(self, specs: list[ImageSpec]) -> BuiltImages:
        with open(self.root / ".archive.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._write_archive(specs)

    def _write_archive(self, specs: list[ImageSpec]) -> BuiltImages:
        blobs: dict[str, bytes | Path] = {}
        index: list[dict[str, object]] = []
        refs: dict[str, str] = {}
        for spec in specs:
            for layer in spec.layers:
                blobs[layer.digest] = layer.path
            config = {
                "architecture": "amd64", "os": "linux", "created": "2025-01-01T00:00:00Z",
                "config": {"Entrypoint": spec.entrypoint, "Cmd": spec.cmd or None,
                           "Env": [f"{k}={v}" for k, v in spec.env.items()] or
                           ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                           "WorkingDir": spec.workdir},
                "rootfs": {"type": "layers", "diff_ids": [layer.digest for layer in spec.layers]},
                "history": [{"created": "2025-01-01T00:00:00Z", "created_by": "autoscaler-bench images.py"}],
            }
            cfg_bytes = _canonical(config)
            cfg_digest = "sha256:" + hashlib.sha256(cfg_bytes).hexdigest()
            blobs[cfg_digest] = cfg_bytes
            manifest = {
                "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest,
                           "size": len(cfg_bytes)},
                "layers": [{"mediaType": LAYER_TYPE, "digest": layer.digest, "size": layer.size}
                           for layer in spec.layers],
            }
            man_bytes = _canonical(manifest)
            man_digest = "sha256:" + hashlib.sha256(man_bytes).hexdigest()
            blobs[man_digest] = man_bytes
            ref = f"{REPO_PREFIX}/{spec.name}:{man_digest.split(':')[1][:16]}"
            refs[spec.name] = ref
            index.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man_digest,
                          "size": len(man_bytes), "platform": {"architecture": "amd64", "os": "linux"},
                          "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}})
        key = hashlib.sha256("".join(sorted(refs.values())).encode()).hexdigest()[:16]
        archive = self.root / f"images-{key}.oci.tar"
        if not archive.exists():
            self.progress(f"writing {archive.name} ({len(specs)} images)")
            tmp = archive.with_suffix(".part")
            with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as tar:
                _add_bytes(tar, "oci-layout", _canonical({"imageLayoutVersion": "1.0.0"}))
                _add_bytes(tar, "index.json", _canonical({"schemaVersion": 2, "manifests": index}))
                tar.addfile(_info("blobs", tarfile.DIRTYPE, 0o755))
                tar.addfile(_info("blobs/sha256", tarfile.DIRTYPE, 0o755))
                for digest, blob in sorted(blobs.items()):
                    arc = f"blobs/sha256/{digest.split(':')[1]}"
                    if isinstance(blob, bytes):
                        _add_bytes(tar, arc, blob)
                    else:
                        info = _info(arc, tarfile.REGTYPE, 0o644)
                        info.size = blob.stat().st_size
                        with blob.open("rb") as fh:
                            tar.addfile(info, fh)
            os.replace(tmp, archive)
            for old in self.root.glob("images-*.oci.tar"):  # one archive at a time (~1 GB each)
                if old != archive:
                    old.unlink(missing_ok=True)
        (self.root / "current.json").write_text(json.dumps({"refs": refs, "archive": str(archive)}, indent=1))
        return BuiltImages(refs, archive)

    def current(self) -> BuiltImages | None:
        """The last built set, if its archive still exists."""
        try:
            d = json.loads((self.root / "current.json").read_text())
        except (OSError, ValueError):
            return None
        archive = Path(d["archive"])
        return BuiltImages(dict(d["refs"]), archive) if archive.exists() else None


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = SOURCE_DATE_EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = _info(name, tarfile.REGTYPE, 0o644)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def stack_artifacts(progress: Progress | None = None) -> tuple[Path, tuple[Path, Path], Path]:
    """FLINK_HOME, the Kafka jar dirs and the job jar - exactly what the local backend installs/builds."""
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.install import Installer
    from harness.backends.local.jobjar import ensure_jar

    cfg = LocalConfig()
    inst = Installer(cfg, progress)
    flink_home = inst.ensure_flink()
    kafka = inst.ensure_maven(f"kafka-{cfg.kafka_version}", [
        ("org.apache.kafka", "kafka_2.13", cfg.kafka_version),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3"),
        ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
    ], "kafka")
    # kafka-topics.sh's TopicCommand lives in kafka-tools (not a dependency of the broker)
    tools = inst.ensure_maven(f"kafka-tools-{cfg.kafka_version}",
                              [("org.apache.kafka", "kafka-tools", cfg.kafka_version)], "kafka tools")
    return flink_home, (kafka, tools), ensure_jar(progress)
