"""core/v1 PodTemplateSpec: the defaults and validation kube-apiserver gives a pod template.

The parts of pkg/apis/core (SetDefaults_PodSpec and friends, ValidatePodTemplateSpec) that a
Job's template needs; batch/strategy.py calls default_pod_template and validate_pod_template.
"""
from __future__ import annotations

import re

from dashboard.kube import formats, validation as v
from dashboard.kube.errors import Cause, duplicate, forbidden, invalid, not_supported, required
from dashboard.kube.selectors import validate_label_selector

from .strategy import PORT_PROTOCOLS


# =======================================================================================
# Defaults
# =======================================================================================

def default_pod_template(template: dict) -> None:
    pod = template.get("spec")
    if not isinstance(pod, dict):
        pod = template["spec"] = {}
    default_pod_spec(pod)


def default_pod_spec(pod: dict) -> None:
    """SetDefaults_PodSpec and the defaults of what it contains (containers, probes, ports,
    volumes, env), as kube-apiserver fills them for a pod template."""
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("restartPolicy", "Always")   # a Job then rejects it, as kube does
    if not isinstance(pod.get("securityContext"), dict):
        pod["securityContext"] = {}
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("schedulerName", "default-scheduler")
    # serviceAccount is the deprecated spelling of serviceAccountName; kube answers both.
    if not pod.get("serviceAccountName") and pod.get("serviceAccount"):
        pod["serviceAccountName"] = pod["serviceAccount"]
    if pod.get("serviceAccountName"):
        pod["serviceAccount"] = pod["serviceAccountName"]
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for container in pod.get(kind) or []:
            _default_container(container)
    for volume in pod.get("volumes") or []:
        _default_volume(volume)


def _default_container(container: dict) -> None:
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = "Always" if image_tag(container.get("image") or "") == "latest" else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if not isinstance(container.get("resources"), dict):
        container["resources"] = {}      # a struct, never omitted on the wire
    for port in container.get("ports") or []:
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict) and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"
    for probe_key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_key)
        if isinstance(probe, dict):
            for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                               ("failureThreshold", 3)):
                if not probe.get(key):
                    probe[key] = value
            _default_handler(probe)
    for hook in ("postStart", "preStop"):
        handler = (container.get("lifecycle") or {}).get(hook)
        if isinstance(handler, dict):
            _default_handler(handler)


def _default_handler(handler: dict) -> None:
    http_get = handler.get("httpGet")
    if isinstance(http_get, dict):
        http_get.setdefault("path", "/")
        http_get.setdefault("scheme", "HTTP")


_VOLUME_SOURCES = ("emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret",
                   "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "quobyte", "cinder", "cephfs",
                   "flocker", "downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume",
                   "photonPersistentDisk", "portworxVolume", "azureDisk", "storageos", "projected", "scaleIO",
                   "csi", "ephemeral", "image")   # in the order kube counts them


def _default_volume(volume: dict) -> None:
    if not any(volume.get(k) is not None for k in _VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        source = volume.get(key)
        if isinstance(source, dict) and source.get("defaultMode") is None:
            source["defaultMode"] = 0o644
    for projection in (volume.get("projected") or {}).get("sources") or []:
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict) and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""
    claim = ((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")
    if isinstance(claim, dict) and claim.get("volumeMode") is None:
        claim["volumeMode"] = "Filesystem"


_TAG = re.compile(r"[\w][\w.-]{0,127}")


def image_tag(image: str) -> str:
    """The tag kube's image-name parser finds: "latest" when there is neither tag nor
    digest; "" for a digest-only reference or a name it cannot parse (so that the pull
    policy becomes IfNotPresent, as kube decides)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    repository, _, tag = name.rpartition(":") if ":" in last else (name, "", "")
    first, slash, rest = repository.partition("/")
    # A first component that looks like a registry host may have capitals; the path may not.
    path = rest if slash and ("." in first or ":" in first or first == "localhost" or first != first.lower()) \
        else repository
    if not repository or path != path.lower() or any(c.isspace() for c in image):
        return ""
    if ":" in last and _TAG.fullmatch(tag) is None:
        return ""
    if not tag:
        return "" if digest else "latest"
    return tag


# =======================================================================================
# Validation (the parts of ValidatePodTemplateSpec a Job relies on)
# =======================================================================================

_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_STANDARD_RESOURCES = _STANDARD_CONTAINER_RESOURCES | {
    "requests.cpu", "requests.memory", "requests.ephemeral-storage", "requests.storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "services",
    "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims",
    "storage", "services.nodeports", "services.loadbalancers"}
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                    "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
                    "status.podIPs")


def validate_pod_template(template: dict, path: str) -> list[Cause]:
    meta = template.get("metadata") or {}
    # kube reports template labels/annotations on <path>.labels, without ".metadata".
    causes = v.validate_labels(meta.get("labels"), f"{path}.labels")
    causes += v.validate_annotations(meta.get("annotations"), f"{path}.annotations")
    pod = template.get("spec") or {}
    causes += validate_pod_spec(pod, f"{path}.spec")
    if pod.get("ephemeralContainers"):
        causes.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return causes


def validate_pod_spec(pod: dict, path: str) -> list[Cause]:
    volume_names, causes = _validate_volumes(pod.get("volumes") or [], f"{path}.volumes")
    containers = pod.get("containers") or []
    if not containers:
        causes.append(required(f"{path}.containers"))
    names: set[str] = set()
    for i, container in enumerate(containers):
        cpath = f"{path}.containers[{i}]"
        causes += _validate_container(container, volume_names, cpath)
        if container.get("name") in names:
            causes.append(duplicate(f"{cpath}.name", container.get("name")))
        names.add(container.get("name"))
        if container.get("restartPolicy") is not None:
            causes.append(forbidden(f"{cpath}.restartPolicy", "may not be set for non-init containers"))
    for i, container in enumerate(pod.get("initContainers") or []):
        cpath = f"{path}.initContainers[{i}]"
        causes += _validate_container(container, volume_names, cpath)
        if container.get("name") in names:
            causes.append(duplicate(f"{cpath}.name", container.get("name")))
        names.add(container.get("name"))
        policy = container.get("restartPolicy")
        if policy is not None and policy != "Always":
            causes.append(not_supported(f"{cpath}.restartPolicy", policy, ["Always"]))
        if policy != "Always":
            # Only restartable ("sidecar") init containers may have probes and hooks.
            for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if container.get(key) is not None:
                    causes.append(forbidden(f"{cpath}.{key}",
                                            "may not be set for init containers without restartPolicy=Always"))
    causes += _one_of(pod.get("restartPolicy") or "", _RESTART_POLICIES, f"{path}.restartPolicy")
    dns_policy = pod.get("dnsPolicy") or ""
    causes += _one_of(dns_policy, _DNS_POLICIES, f"{path}.dnsPolicy")
    causes += v.validate_labels(pod.get("nodeSelector"), f"{path}.nodeSelector")
    if dns_policy == "None" and pod.get("dnsConfig") is None:
        causes.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
    for key, fn in (("serviceAccountName", v.name_is_dns_subdomain), ("nodeName", v.name_is_dns_subdomain),
                    ("priorityClassName", v.name_is_dns_subdomain), ("hostname", v.name_is_dns_label),
                    ("subdomain", v.name_is_dns_label)):
        if pod.get(key):
            causes += v.validate_each(fn(pod[key]), f"{path}.{key}", pod[key])
    deadline = pod.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= v.MAX_INT32:
        causes.append(invalid(f"{path}.activeDeadlineSeconds", deadline, v.inclusive_range_error(1, v.MAX_INT32)))
    for i, toleration in enumerate(pod.get("tolerations") or []):
        causes += _validate_toleration(toleration, f"{path}.tolerations[{i}]")
    causes += _validate_pod_security_context(pod, f"{path}.securityContext")
    if isinstance(pod.get("affinity"), dict):
        causes += _validate_affinity(pod["affinity"], f"{path}.affinity")
    causes += _validate_topology_spread(pod.get("topologySpreadConstraints") or [], f"{path}.topologySpreadConstraints")
    gates: set[str] = set()
    for i, gate in enumerate(pod.get("schedulingGates") or []):
        causes += v.validate_qualified_name(gate.get("name") or "", f"{path}.schedulingGates[{i}].name")
        if gate.get("name") in gates:
            causes.append(duplicate(f"{path}.schedulingGates[{i}].name", gate.get("name")))
        gates.add(gate.get("name"))
    return causes


def _one_of(value: str, allowed: tuple, path: str) -> list[Cause]:
    if not value:
        return [required(path)]
    if value not in allowed:
        return [not_supported(path, value, list(allowed))]
    return []


def _validate_volumes(volumes: list, path: str) -> tuple[set[str], list[Cause]]:
    names: set[str] = set()
    causes: list[Cause] = []
    for i, volume in enumerate(volumes):
        vpath = f"{path}[{i}]"
        found: list[Cause] = []
        sources = [k for k in _VOLUME_SOURCES if volume.get(k) is not None]
        if not sources:
            found.append(required(vpath, "must specify a volume type"))
        for extra in sources[1:]:
            found.append(forbidden(f"{vpath}.{extra}", "may not specify more than 1 volume type"))
        if sources:
            found += _validate_volume_source(sources[0], volume[sources[0]], f"{vpath}.{sources[0]}")
        name = volume.get("name") or ""
        if not name:
            found.append(required(f"{vpath}.name"))
        else:
            found += v.validate_dns1123_label(name, f"{vpath}.name")
        if name in names:
            found.append(duplicate(f"{vpath}.name", name))
        if not found:
            names.add(name)       # only valid volumes can be mounted, as in kube
        causes += found
    return names, causes


def _validate_volume_source(kind: str, source: dict, path: str) -> list[Cause]:
    required_key = {"secret": "secretName", "configMap": "name", "persistentVolumeClaim": "claimName",
                    "hostPath": "path", "nfs": "path"}.get(kind)
    causes = []
    if required_key and not source.get(required_key):
        causes.append(required(f"{path}.{required_key}"))
    mode = source.get("defaultMode")
    if mode is not None and not 0 <= mode <= 0o777:
        causes.append(invalid(f"{path}.defaultMode", mode, "must be a number between 0 and 0777 (octal), both inclusive"))
    if kind == "emptyDir" and source.get("sizeLimit") is not None:
        try:
            if formats.parse_quantity(source["sizeLimit"]).sign() < 0:
                causes.append(forbidden(f"{path}.sizeLimit", "SizeLimit field must be a valid resource quantity"))
        except formats.FormatError:
            pass
    return causes


def _validate_container(container: dict, volume_names: set[str], path: str) -> list[Cause]:
    causes: list[Cause] = []
    name = container.get("name") or ""
    if not name:
        causes.append(required(f"{path}.name"))
    else:
        causes += v.validate_dns1123_label(name, f"{path}.name")
    if not container.get("image"):
        causes.append(required(f"{path}.image"))
    policy = container.get("terminationMessagePolicy") or ""
    if not policy:
        causes.append(required(f"{path}.terminationMessagePolicy", "must be 'File' or 'FallbackToLogsOnError'"))
    elif policy not in _TERMINATION_MESSAGE_POLICIES:
        causes.append(not_supported(f"{path}.terminationMessagePolicy", policy, list(_TERMINATION_MESSAGE_POLICIES)))
    causes += _validate_container_ports(container.get("ports") or [], f"{path}.ports")
    causes += _validate_env(container.get("env") or [], f"{path}.env")
    causes += _validate_env_from(container.get("envFrom") or [], f"{path}.envFrom")
    causes += _validate_volume_mounts(container.get("volumeMounts") or [], volume_names, f"{path}.volumeMounts")
    causes += _one_of(container.get("imagePullPolicy") or "", _PULL_POLICIES, f"{path}.imagePullPolicy")
    causes += _validate_resources(container.get("resources") or {}, f"{path}.resources")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(container.get(key), dict):
            causes += _validate_probe(container[key], f"{path}.{key}", must_succeed_once=key != "readinessProbe")
    for hook in ("postStart", "preStop"):
        handler = (container.get("lifecycle") or {}).get(hook)
        if isinstance(handler, dict):
            causes += _validate_handler(handler, f"{path}.lifecycle.{hook}")
    if isinstance(container.get("securityContext"), dict):
        causes += _validate_container_security_context(container["securityContext"], f"{path}.securityContext")
    return causes


def _validate_container_ports(ports: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        ppath = f"{path}[{i}]"
        name = port.get("name") or ""
        if name:
            errs = v.is_valid_port_name(name)
            if errs:
                causes += v.validate_each(errs, f"{ppath}.name", name)
            elif name in names:
                causes.append(duplicate(f"{ppath}.name", name))
            else:
                names.add(name)
        number = port.get("containerPort", 0)
        if number == 0:
            causes.append(required(f"{ppath}.containerPort"))
        else:
            causes += v.validate_each(v.is_valid_port_num(number), f"{ppath}.containerPort", number)
        if port.get("hostPort"):
            causes += v.validate_each(v.is_valid_port_num(port["hostPort"]), f"{ppath}.hostPort", port["hostPort"])
        causes += _one_of(port.get("protocol") or "", PORT_PROTOCOLS, f"{ppath}.protocol")
    return causes


def _validate_env(env: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, var in enumerate(env):
        epath = f"{path}[{i}]"
        name = var.get("name") or ""
        if not name:
            causes.append(required(f"{epath}.name"))
        else:
            causes += v.validate_each(v.is_relaxed_env_var_name(name), f"{epath}.name", name)
        value_from = var.get("valueFrom")
        if value_from is None:
            continue
        fpath = f"{epath}.valueFrom"
        sources = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                   if value_from.get(k) is not None]
        if "fieldRef" in sources:
            causes += _validate_field_ref(value_from["fieldRef"], f"{fpath}.fieldRef")
        if "resourceFieldRef" in sources and not value_from["resourceFieldRef"].get("resource"):
            causes.append(required(f"{fpath}.resourceFieldRef.resource"))
        for key in ("configMapKeyRef", "secretKeyRef"):
            if key in sources:
                causes += _validate_key_selector(value_from[key], f"{fpath}.{key}")
        if not sources:
            causes.append(invalid(fpath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                             "`configMapKeyRef` or `secretKeyRef`"))
        elif var.get("value"):
            causes.append(invalid(fpath, "", "may not be specified when `value` is not empty"))
        elif len(sources) > 1:
            causes.append(invalid(fpath, "", "may not have more than one field specified at a time"))
    return causes


def _validate_field_ref(ref: dict, path: str) -> list[Cause]:
    if not ref.get("apiVersion"):
        return [required(f"{path}.apiVersion")]
    field_path = ref.get("fieldPath") or ""
    if not field_path:
        return [required(f"{path}.fieldPath")]
    if ref["apiVersion"] != "v1":
        return [invalid(f"{path}.fieldPath", field_path,
                        f"error converting fieldPath: unsupported pod version: {ref['apiVersion']}")]
    if field_path.endswith("']") and "['" in field_path:
        base, _, rest = field_path.partition("['")
        key = rest[:-2]
        if base == "metadata.annotations":
            return v.validate_qualified_name(key.lower(), path)
        if base == "metadata.labels":
            return v.validate_qualified_name(key, path)
        return [invalid(path, base, "does not support subscript")]
    if field_path not in _ENV_FIELD_PATHS:
        return [not_supported(f"{path}.fieldPath", field_path, sorted(_ENV_FIELD_PATHS))]
    return []


def _validate_key_selector(ref: dict, path: str) -> list[Cause]:
    name = ref.get("name") or ""
    causes = v.validate_each(v.is_dns1123_subdomain(name), f"{path}.name", name)
    key = ref.get("key") or ""
    if not key:
        causes.append(required(f"{path}.key"))
    else:
        causes += v.validate_each(v.is_config_map_key(key), f"{path}.key", key)
    return causes


def _validate_env_from(sources: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, source in enumerate(sources):
        spath = f"{path}[{i}]"
        if source.get("prefix"):
            causes += v.validate_each(v.is_relaxed_env_var_name(source["prefix"]), f"{spath}.prefix", source["prefix"])
        refs = [k for k in ("configMapRef", "secretRef") if source.get(k) is not None]
        for key in refs:
            name = source[key].get("name") or ""
            if not name:
                causes.append(required(f"{spath}.{key}.name"))
            else:
                causes += v.validate_each(v.is_dns1123_subdomain(name), f"{spath}.{key}.name", name)
        if not refs:
            causes.append(invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(refs) > 1:
            causes.append(invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def _validate_volume_mounts(mounts: list, volume_names: set[str], path: str) -> list[Cause]:
    causes: list[Cause] = []
    mount_paths: set[str] = set()
    for i, mount in enumerate(mounts):
        mpath = f"{path}[{i}]"
        name = mount.get("name") or ""
        if not name:
            causes.append(required(f"{mpath}.name"))
        if name not in volume_names:
            causes.append(v.not_found(f"{mpath}.name", name))
        mount_path = mount.get("mountPath") or ""
        if not mount_path:
            causes.append(required(f"{mpath}.mountPath"))
        if mount_path in mount_paths:
            causes.append(invalid(f"{mpath}.mountPath", mount_path, "must be unique"))
        mount_paths.add(mount_path)
    return causes


def _resource_name_causes(name: str, path: str) -> list[Cause]:
    """validateContainerResourceName: standard container resources, hugepages-*, or an
    extended resource with a domain prefix."""
    causes = v.validate_qualified_name(name, path)
    if "/" not in name:
        if not causes and not (name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))):
            causes.append(invalid(path, name, "must be a standard resource type or fully qualified"))
        if not (name in _STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-")):
            causes.append(invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native_resource(name) and not _is_extended_resource(name):
        causes.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended_resource(name: str) -> bool:
    return (not _is_native_resource(name) and not name.startswith("requests.")
            and not v.is_qualified_name("requests." + name))


def _validate_resources(resources: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    parsed: dict[str, dict[str, formats.Quantity]] = {"limits": {}, "requests": {}}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name, text in values.items():
            qpath = f"{path}.{kind}[{name}]"
            causes += _resource_name_causes(name, qpath)
            try:
                quantity = parsed[kind][name] = formats.parse_quantity(text)
            except formats.FormatError:
                continue   # reported when decoded (normalize)
            if quantity.sign() < 0:
                causes.append(invalid(qpath, str(quantity), v.IS_NEGATIVE))
            if _is_extended_resource(name) and not quantity.is_integer():
                causes.append(invalid(qpath, str(quantity), "must be an integer"))
            if kind == "requests":
                overcommit = _is_native_resource(name) and not name.startswith("hugepages-")
                limit = parsed["limits"].get(name)
                if limit is not None:
                    if not overcommit and quantity.compare(limit) != 0:
                        causes.append(invalid(f"{path}.requests", str(quantity),
                                              f"must be equal to {name} limit of {limit}"))
                    elif quantity.compare(limit) > 0:
                        causes.append(invalid(f"{path}.requests", str(quantity),
                                              f"must be less than or equal to {name} limit of {limit}"))
                elif not overcommit:
                    causes.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    names = set(limits) | set(requests)
    if any(n.startswith("hugepages-") for n in names) and not names & {"cpu", "memory"}:
        causes.append(forbidden(path, "HugePages require cpu or memory"))
    return causes


def _validate_probe(probe: dict, path: str, must_succeed_once: bool) -> list[Cause]:
    causes = _validate_handler(probe, path)
    for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        causes += v.validate_nonnegative(probe.get(key, 0), f"{path}.{key}")
    grace = probe.get("terminationGracePeriodSeconds")
    if grace is not None and grace <= 0:
        causes.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
    if must_succeed_once and probe.get("successThreshold", 1) != 1:
        # Liveness and startup probes: one success is all there can be.
        causes.append(invalid(f"{path}.successThreshold", probe.get("successThreshold"), "must be 1"))
    return causes


def _validate_handler(handler: dict, path: str) -> list[Cause]:
    kinds = [k for k in ("exec", "httpGet", "tcpSocket", "grpc", "sleep") if handler.get(k) is not None]
    if not kinds:
        return [required(path, "must specify a handler type")]
    causes = [forbidden(f"{path}.{k}", "may not specify more than 1 handler type") for k in kinds[1:]]
    kind, action = kinds[0], handler[kinds[0]]
    if kind == "exec" and not action.get("command"):
        causes.append(required(f"{path}.exec.command"))
    if kind in ("httpGet", "tcpSocket", "grpc"):
        port = action.get("port")
        if isinstance(port, str):
            causes += v.validate_each(v.is_valid_port_name(port), f"{path}.{kind}.port", port)
        else:
            causes += v.validate_each(v.is_valid_port_num(port), f"{path}.{kind}.port", port)
    if kind == "httpGet":
        if not action.get("path"):
            causes.append(required(f"{path}.httpGet.path"))
        scheme = action.get("scheme") or ""
        if scheme not in ("HTTP", "HTTPS"):
            causes.append(not_supported(f"{path}.httpGet.scheme", scheme, ["HTTP", "HTTPS"]))
    return causes


def _validate_toleration(toleration: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    key, operator = toleration.get("key") or "", toleration.get("operator") or ""
    effect, value = toleration.get("effect") or "", toleration.get("value") or ""
    if key:
        causes += v.validate_qualified_name(key, f"{path}.key")
    if not key and operator != "Exists":
        causes.append(invalid(f"{path}.operator", operator,
                              'operator must be Exists when `key` is empty, which means "match all values and all keys"'))
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        causes.append(invalid(f"{path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    if operator in ("Equal", ""):
        errs = v.is_valid_label_value(value)
        if errs:
            causes.append(invalid(f"{path}.operator", value, ";".join(errs)))
    elif operator == "Exists":
        if value:
            causes.append(invalid(f"{path}.operator", toleration, "value must be empty when `operator` is 'Exists'"))
    else:
        causes.append(not_supported(f"{path}.operator", operator, ["Equal", "Exists"]))
    if effect and effect not in _TAINT_EFFECTS:
        causes.append(not_supported(f"{path}.effect", effect, list(_TAINT_EFFECTS)))
    return causes


# =======================================================================================
# Security contexts (validatePodSpecSecurityContext, ValidateSecurityContext)
# =======================================================================================

_ID_RANGE = f"must be between 0 and {2 ** 31 - 1}, inclusive"   # IsValidUserID / IsValidGroupID
_PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
_SYSCTL_MAX = 253
_SYSCTL_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_SYSCTL_FMT = rf"^({_SYSCTL_SEGMENT}[\./])*{_SYSCTL_SEGMENT}$"
_SYSCTL = re.compile(_SYSCTL_FMT)


def _validate_id(value, path: str) -> list[Cause]:
    if value is not None and not 0 <= value <= v.MAX_INT32:
        return [invalid(path, value, _ID_RANGE)]
    return []


def _validate_profile(profile: dict | None, path: str, what: str) -> list[Cause]:
    """seccompProfile / appArmorProfile: a known type; localhostProfile exactly for Localhost."""
    if profile is None:
        return []
    kind, local = profile.get("type") or "", profile.get("localhostProfile")
    if not kind:
        return [required(f"{path}.type", f"type is required when {what}Profile is set")]
    if kind not in _PROFILE_TYPES:
        return [not_supported(f"{path}.type", kind, list(_PROFILE_TYPES))]
    label = "seccomp" if what == "seccomp" else "AppArmor"
    if kind == "Localhost" and not local:
        return [required(f"{path}.localhostProfile", f"must be set when {label} type is Localhost")]
    if kind != "Localhost" and local is not None:
        return [invalid(f"{path}.localhostProfile", local, f"can only be set when {label} type is Localhost")]
    return []


def _validate_pod_security_context(pod: dict, path: str) -> list[Cause]:
    sc = pod.get("securityContext") or {}
    causes: list[Cause] = []
    causes += _validate_id(sc.get("fsGroup"), f"{path}.fsGroup")
    causes += _validate_id(sc.get("runAsUser"), f"{path}.runAsUser")
    causes += _validate_id(sc.get("runAsGroup"), f"{path}.runAsGroup")
    for i, group in enumerate(sc.get("supplementalGroups") or []):
        causes += _validate_id(group, f"{path}.supplementalGroups[{i}]")
    # kube checks these on its internal type, where both live in the security context.
    if pod.get("shareProcessNamespace") and pod.get("hostPID"):
        causes.append(invalid(f"{path}.shareProcessNamespace", True, "ShareProcessNamespace and HostPID cannot both be enabled"))
    policy = sc.get("fsGroupChangePolicy")
    if policy is not None and policy not in ("OnRootMismatch", "Always"):
        causes.append(not_supported(f"{path}.fsGroupChangePolicy", policy, ["OnRootMismatch", "Always"]))
    seen: set[str] = set()
    for i, sysctl in enumerate(sc.get("sysctls") or []):
        name = sysctl.get("name") or ""
        if not name:
            causes.append(required(f"{path}.sysctls[{i}].name"))
        elif len(name) > _SYSCTL_MAX or not _SYSCTL.match(name):
            causes.append(invalid(f"{path}.sysctls[{i}].name", name,
                                  f"must have at most {_SYSCTL_MAX} characters and match regex {_SYSCTL_FMT}"))
        elif name in seen:
            causes.append(duplicate(f"{path}.sysctls[{i}].name", name))
        seen.add(name)
    causes += _validate_profile(sc.get("seccompProfile"), f"{path}.seccompProfile", "seccomp")
    causes += _validate_profile(sc.get("appArmorProfile"), f"{path}.appArmorProfile", "appArmor")
    return causes


def _validate_container_security_context(sc: dict, path: str) -> list[Cause]:
    causes = _validate_id(sc.get("runAsUser"), f"{path}.runAsUser")
    causes += _validate_id(sc.get("runAsGroup"), f"{path}.runAsGroup")
    proc_mount = sc.get("procMount")
    if proc_mount is not None and proc_mount not in ("Default", "Unmasked"):
        causes.append(not_supported(f"{path}.procMount", proc_mount, ["Default", "Unmasked"]))
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged"):
            causes.append(v.invalid_no_value(path, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
        if "CAP_SYS_ADMIN" in ((sc.get("capabilities") or {}).get("add") or []):
            causes.append(v.invalid_no_value(path, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
    causes += _validate_profile(sc.get("seccompProfile"), f"{path}.seccompProfile", "seccomp")
    causes += _validate_profile(sc.get("appArmorProfile"), f"{path}.appArmorProfile", "appArmor")
    return causes


# =======================================================================================
# Affinity (validateAffinity) and topology spread (validateTopologySpreadConstraints)
# =======================================================================================

_NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_WEIGHT_RANGE = "must be in the range 1-100"
_NOT_POSITIVE = "must be greater than zero"


def _validate_node_selector_requirement(req: dict, path: str) -> list[Cause]:
    operator, values = req.get("operator") or "", req.get("values") or []
    causes: list[Cause] = []
    if operator in ("In", "NotIn"):
        if not values:
            causes.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            causes.append(forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        causes.append(not_supported(f"{path}.operator", operator, list(_NODE_SELECTOR_OPERATORS)))
    return causes + v.validate_qualified_name(req.get("key") or "", f"{path}.key")


def _validate_node_selector_term(term: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for j, req in enumerate(term.get("matchExpressions") or []):
        causes += _validate_node_selector_requirement(req, f"{path}.matchExpressions[{j}]")
    for j, req in enumerate(term.get("matchFields") or []):
        fpath = f"{path}.matchFields[{j}]"
        operator = req.get("operator") or ""
        if operator in ("In", "NotIn"):
            if len(req.get("values") or []) != 1:
                causes.append(required(f"{fpath}.values",
                                       "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
        else:
            causes.append(invalid(f"{fpath}.operator", operator, "not a valid selector operator"))
        if req.get("key") != "metadata.name":
            causes.append(not_supported(f"{fpath}.key", req.get("key") or "", ["metadata.name"]))
    return causes


def _validate_pod_affinity_term(term: dict, path: str) -> list[Cause]:
    causes = validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    causes += validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for name in term.get("namespaces") or []:
        # kube reports these on "namespace" (sic).
        causes += v.validate_each(v.name_is_dns_label(name), f"{path}.namespace", name)
    key = term.get("topologyKey") or ""
    if not key:
        causes.append(required(f"{path}.topologyKey", "can not be empty"))
    else:
        causes += v.validate_qualified_name(key, f"{path}.topologyKey")
    causes += _validate_match_label_keys(term, path, "labelSelector")
    return causes


def _validate_match_label_keys(term: dict, path: str, selector_field: str) -> list[Cause]:
    """matchLabelKeys (and mismatchLabelKeys): label names, only with a selector, not in it."""
    causes: list[Cause] = []
    selector = term.get(selector_field)
    in_selector = set()
    if selector:
        in_selector = set((selector.get("matchLabels") or {}).keys())
        in_selector |= {e.get("key") for e in selector.get("matchExpressions") or []}
    for key_field in ("matchLabelKeys", "mismatchLabelKeys"):
        keys = term.get(key_field) or []
        if keys and selector is None:
            causes.append(forbidden(f"{path}.{key_field}", "must not be specified when labelSelector is not set"))
            continue
        for i, key in enumerate(keys):
            causes += v.validate_qualified_name(key, f"{path}.{key_field}[{i}]")
            if key in in_selector:
                causes.append(invalid(f"{path}.{key_field}[{i}]", key, "exists in both matchLabelKeys and labelSelector"))
    both = set(term.get("matchLabelKeys") or []) & set(term.get("mismatchLabelKeys") or [])
    for i, key in enumerate(term.get("mismatchLabelKeys") or []):
        if key in both:
            causes.append(invalid(f"{path}.mismatchLabelKeys[{i}]", key, "exists in both matchLabelKeys and mismatchLabelKeys"))
    return causes


def _validate_affinity(affinity: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    node = affinity.get("nodeAffinity") or {}
    required_sel = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_sel is not None:
        rpath = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        terms = required_sel.get("nodeSelectorTerms") or []
        if not terms:
            causes.append(required(f"{rpath}.nodeSelectorTerms", "must have at least one node selector term"))
        for i, term in enumerate(terms):
            causes += _validate_node_selector_term(term, f"{rpath}.nodeSelectorTerms[{i}]")
    for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        ppath = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        causes += _validate_weight(pref, ppath)
        causes += _validate_node_selector_term(pref.get("preference") or {}, f"{ppath}.preference")
    for kind in ("podAffinity", "podAntiAffinity"):
        section = affinity.get(kind) or {}
        for i, term in enumerate(section.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            causes += _validate_pod_affinity_term(term, f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, weighted in enumerate(section.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            wpath = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            causes += _validate_weight(weighted, wpath)
            causes += _validate_pod_affinity_term(weighted.get("podAffinityTerm") or {}, f"{wpath}.podAffinityTerm")
    return causes


def _validate_weight(term: dict, path: str) -> list[Cause]:
    """A preferred scheduling term's weight: 1-100."""
    weight = term.get("weight") or 0
    return [] if 1 <= weight <= 100 else [invalid(f"{path}.weight", weight, _WEIGHT_RANGE)]


def _validate_topology_spread(constraints: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    pairs: set[tuple[str, str]] = set()
    for i, c in enumerate(constraints):
        cpath = f"{path}[{i}]"
        skew = c.get("maxSkew") or 0
        if skew <= 0:
            causes.append(invalid(f"{cpath}.maxSkew", skew, _NOT_POSITIVE))
        key = c.get("topologyKey") or ""
        if not key:
            causes.append(required(f"{cpath}.topologyKey", "can not be empty"))
        else:
            causes += v.validate_qualified_name(key, f"{cpath}.topologyKey")
        action = c.get("whenUnsatisfiable") or ""
        if action not in ("DoNotSchedule", "ScheduleAnyway"):
            causes.append(not_supported(f"{cpath}.whenUnsatisfiable", action, ["DoNotSchedule", "ScheduleAnyway"]))
        min_domains = c.get("minDomains")
        if min_domains is not None:
            if min_domains <= 0:
                causes.append(invalid(f"{cpath}.minDomains", min_domains, _NOT_POSITIVE))
            if action != "DoNotSchedule":
                causes.append(invalid(f"{cpath}.minDomains", min_domains,
                                      f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"))
        if (key, action) in pairs:
            causes.append(duplicate(f"{cpath}.{{topologyKey, whenUnsatisfiable}}", f"{{{key}, {action}}}"))
        pairs.add((key, action))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(policy) is not None and c[policy] not in ("Honor", "Ignore"):
                causes.append(not_supported(f"{cpath}.{policy}", c[policy], ["Honor", "Ignore"]))
        causes += _validate_match_label_keys({"labelSelector": c.get("labelSelector"),
                                              "matchLabelKeys": c.get("matchLabelKeys")}, cpath, "labelSelector")
        causes += validate_label_selector(c.get("labelSelector"), f"{cpath}.labelSelector")
    return causes
