"""The Pod Security Standards' `restricted` profile (which includes `baseline`) as a checker.

Why our own: the API server's admission is what enforces it (the namespace is labelled
`enforce: restricted`), but no API server can run in CI here, and kubernetes-validate checks
only the schema. So the controls of https://kubernetes.io/docs/concepts/security/pod-security-standards/
are written out below, one function per control, over a pod as the API's JSON (camelCase); the
tests run every pod the backend builds through it and show it rejects pods that break each rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {None, "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
    "image",
}
VOLUME_META = {"name"}


def _containers(spec: dict) -> Iterator[tuple[str, dict]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            yield f"{kind}[{c.get('name')}]", c


def _sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


# ---- baseline --------------------------------------------------------------------------------
def host_process(spec):
    for where, obj in [("pod", spec), *_containers(spec)]:
        if (_sc(obj).get("windowsOptions") or {}).get("hostProcess"):
            yield f"{where}: windowsOptions.hostProcess must not be true"


def host_namespaces(spec):
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            yield f"pod: {key} must not be true"


def privileged(spec):
    for where, c in _containers(spec):
        if _sc(c).get("privileged"):
            yield f"{where}: privileged must not be true"


def baseline_capabilities(spec):
    for where, c in _containers(spec):
        extra = set((_sc(c).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            yield f"{where}: capabilities.add {sorted(extra)} are not allowed"


def host_path(spec):
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            yield f"volume {v.get('name')}: hostPath is not allowed"


def host_ports(spec):
    for where, c in _containers(spec):
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                yield f"{where}: hostPort {p['hostPort']} is not allowed"


def apparmor(spec):
    for where, obj in [("pod", spec), *_containers(spec)]:
        t = (_sc(obj).get("appArmorProfile") or {}).get("type")
        if t not in (None, "RuntimeDefault", "Localhost"):
            yield f"{where}: appArmorProfile.type {t} is not allowed"


def selinux(spec):
    for where, obj in [("pod", spec), *_containers(spec)]:
        opts = _sc(obj).get("seLinuxOptions") or {}
        if opts.get("type") not in SELINUX_TYPES:
            yield f"{where}: seLinuxOptions.type {opts.get('type')} is not allowed"
        for key in ("user", "role"):
            if opts.get(key):
                yield f"{where}: seLinuxOptions.{key} must not be set"


def proc_mount(spec):
    for where, c in _containers(spec):
        if _sc(c).get("procMount") not in (None, "Default"):
            yield f"{where}: procMount must be Default"


def sysctls(spec):
    for s in _sc(spec).get("sysctls") or []:
        if s.get("name") not in SAFE_SYSCTLS:
            yield f"pod: sysctl {s.get('name')} is not allowed"


# ---- restricted ------------------------------------------------------------------------------
def volume_types(spec):
    for v in spec.get("volumes") or []:
        kinds = set(v) - VOLUME_META
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"volume {v.get('name')}: type {sorted(kinds - RESTRICTED_VOLUMES)} is not allowed"


def privilege_escalation(spec):
    for where, c in _containers(spec):
        if _sc(c).get("allowPrivilegeEscalation") is not False:
            yield f"{where}: allowPrivilegeEscalation must be false"


def run_as_non_root(spec):
    pod_level = _sc(spec).get("runAsNonRoot")
    if pod_level is False:
        yield "pod: runAsNonRoot must not be false"
    for where, c in _containers(spec):
        mine = _sc(c).get("runAsNonRoot")
        if mine is False or (mine is None and pod_level is not True):
            yield f"{where}: runAsNonRoot must be true (here or on the pod)"


def run_as_user(spec):
    for where, obj in [("pod", spec), *_containers(spec)]:
        if _sc(obj).get("runAsUser") == 0:
            yield f"{where}: runAsUser must not be 0"


def seccomp(spec):
    allowed = ("RuntimeDefault", "Localhost")
    pod_type = (_sc(spec).get("seccompProfile") or {}).get("type")
    if pod_type is not None and pod_type not in allowed:
        yield f"pod: seccompProfile.type {pod_type} is not allowed"
    for where, c in _containers(spec):
        mine = (_sc(c).get("seccompProfile") or {}).get("type")
        if mine is not None and mine not in allowed:
            yield f"{where}: seccompProfile.type {mine} is not allowed"
        elif mine is None and pod_type not in allowed:
            yield f"{where}: seccompProfile must be RuntimeDefault or Localhost (here or on the pod)"


def restricted_capabilities(spec):
    for where, c in _containers(spec):
        caps = _sc(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            yield f"{where}: capabilities.drop must include ALL"
        extra = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if extra:
            yield f"{where}: capabilities.add may hold only NET_BIND_SERVICE, not {sorted(extra)}"


BASELINE: tuple[Callable, ...] = (
    host_process,
    host_namespaces,
    privileged,
    baseline_capabilities,
    host_path,
    host_ports,
    apparmor,
    selinux,
    proc_mount,
    sysctls,
)
RESTRICTED: tuple[Callable, ...] = BASELINE + (
    volume_types,
    privilege_escalation,
    run_as_non_root,
    run_as_user,
    seccomp,
    restricted_capabilities,
)


def restricted_violations(pod: dict) -> list[str]:
    """Every way `pod` (the API's JSON of a Pod) breaks the restricted profile; [] when it meets it."""
    spec = pod.get("spec") or {}
    return [msg for control in RESTRICTED for msg in control(spec)]
