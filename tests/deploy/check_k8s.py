#!/usr/bin/python3
"""Cross-reference checks of deploy/k8s that no schema can make.

  check_k8s.py OUT.json   writes every object as [{"file", "object"}]
                          (k8s_test.sh validates the files themselves).
Checks, one FAIL line per problem:
  * kustomization.yaml lists exactly the manifest files here but the
    Secret with empty placeholders (secret-join.yaml);
  * every workload's selector matches its pod template's labels, and every
    Service selects some pod template;
  * the StatefulSet's serviceName is a headless Service, it has a
    volumeClaimTemplate mounted at its --state-dir, and runs one replica;
  * every probe's port is a containerPort of its container; the
    coordinator runs TLS (no --insecure), so its startup, readiness and
    liveness probes are HTTPS GETs of /healthz on its --http-listen port
    (the kubelet's grpc: probes cannot speak TLS), and its --san names
    cover the client Service and TRAINCTL_COORDINATOR's host;
  * the worker's join init container (--join-only) has --ca-cert and
    --join-token-file from read-only Secret mounts and writes the worker's
    --state-dir; the worker container itself never sees the join token;
  * those files are keys of a Secret volume mounted read-only (and
    readable: fsGroup or the mode), and the --state-dir is a writable mount;
  * the worker DaemonSet requests nvidia.com/gpu;
  * every configMapKeyRef and secret volume names an object (and key) here,
    and TRAINCTL_COORDINATOR names the client Service and its port;
  * images carry a tag other than latest; pods run as non-root.
"""

import glob
import json
import os
import sys

import yaml

SOURCE = os.environ.get("TRAINCTL_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(SOURCE, "deploy", "k8s")
problems = []


def problem(text):
    problems.append(text)


def load():
    objects = []
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml"))):
        name = os.path.basename(path)
        if name == "kustomization.yaml":
            continue
        with open(path, encoding="utf-8") as f:
            for doc in yaml.safe_load_all(f):
                if doc:
                    objects.append({"file": name, "object": doc})
    return objects


def flag_value(args, flag):
    for arg in args:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def main():
    objects = load()
    by_kind = {}
    for entry in objects:
        o = entry["object"]
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o

    with open(os.path.join(K8S, "kustomization.yaml"), encoding="utf-8") as f:
        listed = set(yaml.safe_load(f).get("resources", []))
    # The Secret's empty placeholders must never be applied over real keys.
    files = {e["file"] for e in objects} - {"secret-join.yaml"}
    if listed != files:
        problem(f"kustomization.yaml resources {sorted(listed)} != manifest "
                f"files but secret-join.yaml {sorted(files)}")

    workloads = {**by_kind.get("StatefulSet", {}),
                 **by_kind.get("DaemonSet", {}),
                 **by_kind.get("Deployment", {})}
    pod_labels = []
    for name, w in workloads.items():
        selector = w["spec"]["selector"].get("matchLabels", {})
        labels = w["spec"]["template"]["metadata"].get("labels", {})
        pod_labels.append(labels)
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            problem(f"{name}: selector {selector} does not match template "
                    f"labels {labels}")
        pod = w["spec"]["template"]["spec"]
        if not pod.get("securityContext", {}).get("runAsNonRoot"):
            problem(f"{name}: pod does not set runAsNonRoot")
        for c in pod["containers"] + pod.get("initContainers", []):
            image = c.get("image", "")
            tag = image.rpartition(":")[2] if ":" in image else ""
            if not tag or tag == "latest":
                problem(f"{name}: image {image!r} needs a tag other than latest")
            check_refs(name, c, pod, by_kind)
            check_probes(name, c)

    services = by_kind.get("Service", {})
    for name, s in services.items():
        sel = s["spec"].get("selector", {})
        if not any(all(l.get(k) == v for k, v in sel.items())
                   for l in pod_labels):
            problem(f"Service {name}: selector {sel} matches no pod template")

    coordinator = by_kind.get("StatefulSet", {}).get("trainctl-coordinator")
    if coordinator is None:
        problem("no StatefulSet trainctl-coordinator")
    else:
        check_coordinator(coordinator, services, by_kind)
    workers = by_kind.get("DaemonSet", {}).get("trainctl-worker")
    if workers is None:
        problem("no DaemonSet trainctl-worker")
    else:
        limits = workers["spec"]["template"]["spec"]["containers"][0] \
            .get("resources", {}).get("limits", {})
        if int(limits.get("nvidia.com/gpu", 0)) < 1:
            problem("trainctl-worker does not request nvidia.com/gpu")
        check_worker(workers, by_kind)
    return objects


def check_refs(name, container, pod, by_kind):
    for env in container.get("env", []):
        ref = env.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            cm = by_kind.get("ConfigMap", {}).get(ref["name"])
            if cm is None or ref["key"] not in cm.get("data", {}):
                problem(f"{name}: env {env['name']} refers to missing "
                        f"ConfigMap key {ref['name']}/{ref['key']}")
    for volume in pod.get("volumes", []):
        secret = volume.get("secret")
        if secret and secret["secretName"] not in by_kind.get("Secret", {}):
            problem(f"{name}: volume {volume['name']} refers to missing "
                    f"Secret {secret['secretName']}")
    mounts = {m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"] for v in pod.get("volumes", [])}
    claims = set()
    if name in by_kind.get("StatefulSet", {}):
        claims = {t["metadata"]["name"] for t in
                  by_kind["StatefulSet"][name]["spec"].get(
                      "volumeClaimTemplates", [])}
    for m in mounts - volumes - claims:
        problem(f"{name}: volumeMount {m} has no volume")


def container_port(container, port):
    """The number of a probe's port (a number or a port's name), or None."""
    for p in container.get("ports", []):
        if port in (p["containerPort"], p.get("name")):
            return p["containerPort"]
    return None


def check_probes(name, container):
    ports = sorted(p["containerPort"] for p in container.get("ports", []))
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind) or {}
        for handler in ("grpc", "httpGet", "tcpSocket"):
            if handler in probe and \
                    container_port(container, probe[handler]["port"]) is None:
                problem(f"{name}: {kind} {handler} port "
                        f"{probe[handler]['port']} is not a containerPort "
                        f"{ports}")


def check_secret_file(who, container, pod, by_kind, flag):
    """The flag names a key of a Secret the container mounts read-only and
    can read; returns the volume it comes from, or None."""
    args = container.get("args", [])
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    path = flag_value(args, flag)
    if not path:
        problem(f"{who} has no {flag}")
        return None
    directory, _, key = path.rpartition("/")
    mount = mounts.get(directory)
    volume = volumes.get(mount["name"], {}) if mount else {}
    secret = volume.get("secret")
    if not secret or not mount.get("readOnly"):
        problem(f"{who} {flag}={path} is not in a Secret volume mounted "
                "read-only")
        return None
    data = by_kind.get("Secret", {}).get(secret["secretName"], {})
    if key not in {**data.get("data", {}), **data.get("stringData", {})}:
        problem(f"{who} {flag}={path}: Secret {secret['secretName']} has no "
                f"key {key}")
    items = secret.get("items")
    if items is not None and key not in {i["path"] for i in items}:
        problem(f"{who} {flag}={path}: the volume projects only "
                f"{sorted(i['path'] for i in items)}")
    mode = secret.get("defaultMode", 0o644)
    context = pod.get("securityContext", {})
    group_reads = mode & 0o040 and context.get("fsGroup") is not None
    if not (mode & 0o004 or group_reads):
        problem(f"{who} (uid {context.get('runAsUser')}) cannot read {path}: "
                f"mode {mode:o} of a root-owned file, without an fsGroup and "
                "group read")
    return volume


def exposed_secret_keys(container, pod, by_kind):
    """Every Secret key a container can read through its mounts."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    keys = set()
    for m in container.get("volumeMounts", []):
        secret = volumes.get(m["name"], {}).get("secret")
        if not secret:
            continue
        if secret.get("items") is not None:
            keys |= {i["key"] for i in secret["items"]}
        else:
            data = by_kind.get("Secret", {}).get(secret["secretName"], {})
            keys |= set(data.get("data", {})) | set(data.get("stringData", {}))
    return keys


def check_worker(ds, by_kind):
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = c.get("args", [])
    if "--insecure" in args:
        problem("trainctl-worker runs --insecure")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    check_secret_file("trainctl-worker", c, pod, by_kind, "--ca-cert")
    # The join token is the join step's alone: the agent and its ranks (a
    # job's code) never see it (security review C1).
    if flag_value(args, "--join-token-file") or "--join-token" in args:
        problem("trainctl-worker gets the join token; only its join init "
                "container may")
    if "join.token" in exposed_secret_keys(c, pod, by_kind):
        problem("trainctl-worker mounts a Secret volume holding join.token")
    joins = [i for i in pod.get("initContainers", [])
             if "--join-only" in i.get("args", [])]
    if len(joins) != 1:
        problem("trainctl-worker needs one init container running "
                "trainctl-worker --join-only")
    else:
        join = joins[0]
        check_secret_file("the join init container", join, pod, by_kind,
                          "--ca-cert")
        check_secret_file("the join init container", join, pod, by_kind,
                          "--join-token-file")
        join_args = join.get("args", [])
        for flag in ("--name", "--slots", "--state-dir"):
            if flag_value(join_args, flag) != flag_value(args, flag):
                problem(f"the join init container's {flag} "
                        f"{flag_value(join_args, flag)!r} is not the worker's "
                        f"{flag_value(args, flag)!r}")
        join_mounts = {m["mountPath"]: m for m in join.get("volumeMounts", [])}
        state = flag_value(join_args, "--state-dir")
        if state not in join_mounts or join_mounts[state].get("readOnly") or \
                state in mounts and \
                join_mounts[state]["name"] != mounts[state]["name"]:
            problem("the join init container does not write the worker's "
                    "--state-dir volume")
    state = flag_value(args, "--state-dir")
    if state not in mounts or mounts[state].get("readOnly"):
        problem(f"trainctl-worker --state-dir {state!r} is not a writable "
                "mount (the root filesystem is read-only)")


def check_coordinator(sts, services, by_kind):
    spec = sts["spec"]
    headless = services.get(spec.get("serviceName"))
    if headless is None or headless["spec"].get("clusterIP") != "None":
        problem(f"StatefulSet serviceName {spec.get('serviceName')} is not a "
                "headless Service")
    if spec.get("replicas") != 1:
        problem("the coordinator must run exactly one replica (its database "
                "is locked exclusively)")
    c = spec["template"]["spec"]["containers"][0]
    listen = flag_value(c.get("args", []), "--listen") or ""
    port = int(listen.rpartition(":")[2] or 0)
    if not listen.startswith("0.0.0.0:"):
        problem(f"coordinator --listen {listen!r} is not reachable from "
                "other pods")
    args = c.get("args", [])
    if "--insecure" in args:
        problem("the coordinator runs --insecure")
    http_port = int((flag_value(args, "--http-listen") or ":0")
                    .rpartition(":")[2] or 0)
    if not http_port:
        problem("the coordinator has no --http-listen port for /healthz")
    if container_port(c, port) is None:
        problem(f"the coordinator's --listen port {port} is not a "
                "containerPort")
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = c.get(kind, {})
        get = probe.get("httpGet", {})
        if "grpc" in probe:
            problem(f"coordinator {kind} is a grpc probe: the kubelet's "
                    "cannot speak TLS")
        elif get.get("path") != "/healthz" or get.get("scheme") != "HTTPS" \
                or container_port(c, get.get("port")) != http_port:
            problem(f"coordinator {kind} is not an HTTPS GET of /healthz on "
                    f"the --http-listen port {http_port}: {probe}")
    sans = {a.split("=", 1)[1] for a in args if a.startswith("--san=")}
    client_name = [n for n, svc in services.items()
                   if svc["spec"].get("clusterIP") != "None"]
    namespace = sts["metadata"]["namespace"]
    for n in client_name:
        for want in (n, f"{n}.{namespace}", f"{n}.{namespace}.svc"):
            if want not in sans:
                problem(f"the coordinator's --san names lack {want} (the "
                        f"client Service): {sorted(sans)}")
    state_dir = flag_value(c.get("args", []), "--state-dir")
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    if not any(m["name"] in claims and m["mountPath"] == state_dir
               for m in c.get("volumeMounts", [])):
        problem(f"no volumeClaimTemplate is mounted at --state-dir {state_dir}")
    address = by_kind.get("ConfigMap", {}).get("trainctl-config", {}) \
        .get("data", {}).get("TRAINCTL_COORDINATOR", "")
    host, _, svc_port = address.rpartition(":")
    if host not in sans:
        problem(f"TRAINCTL_COORDINATOR's host {host} is not among the "
                f"coordinator's --san names, so workers cannot verify it")
    client = services.get(host.split(".")[0])
    if client is None or client["spec"].get("clusterIP") == "None" or \
            int(svc_port or 0) not in [p["port"] for p in client["spec"]["ports"]]:
        problem(f"TRAINCTL_COORDINATOR {address!r} is not the client "
                "Service's name and port")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else None
    objects = main()
    if problems:
        print("\n".join("FAIL: " + p for p in problems), file=sys.stderr)
        sys.exit(1)
    print(f"ok: {len(objects)} objects cross-checked "
          f"({', '.join(sorted({e['object']['kind'] for e in objects}))})")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(objects, f)
