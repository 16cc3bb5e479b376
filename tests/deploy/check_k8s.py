#!/usr/bin/python3
"""Cross-reference checks of deploy/k8s that no schema can make.

  check_k8s.py OUT.json   writes every object as [{"file", "object"}] for
                          the schema validator (k8s/validate.mjs).
Checks, one FAIL line per problem:
  * kustomization.yaml lists exactly the manifest files here but the
    Secret with empty placeholders (secret-tls.yaml);
  * every workload's selector matches its pod template's labels, and every
    Service selects some pod template;
  * the StatefulSet's serviceName is a headless Service, it has a
    volumeClaimTemplate mounted at its --state-dir, and runs one replica;
  * every gRPC probe's port is a containerPort of its container and the
    port the coordinator --listen's on; the coordinator has readiness and
    liveness probes;
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
    files = {e["file"] for e in objects} - {"secret-tls.yaml"}
    if listed != files:
        problem(f"kustomization.yaml resources {sorted(listed)} != manifest "
                f"files but secret-tls.yaml {sorted(files)}")

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
        for c in pod["containers"]:
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


def check_probes(name, container):
    ports = {p["containerPort"] for p in container.get("ports", [])}
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if probe and "grpc" in probe and probe["grpc"]["port"] not in ports:
            problem(f"{name}: {kind} grpc port {probe['grpc']['port']} is "
                    f"not a containerPort {sorted(ports)}")


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
    for kind in ("readinessProbe", "livenessProbe"):
        if c.get(kind, {}).get("grpc", {}).get("port") != port:
            problem(f"coordinator {kind} is not a grpc probe on port {port}")
    state_dir = flag_value(c.get("args", []), "--state-dir")
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    if not any(m["name"] in claims and m["mountPath"] == state_dir
               for m in c.get("volumeMounts", [])):
        problem(f"no volumeClaimTemplate is mounted at --state-dir {state_dir}")
    address = by_kind.get("ConfigMap", {}).get("trainctl-config", {}) \
        .get("data", {}).get("TRAINCTL_COORDINATOR", "")
    host, _, svc_port = address.rpartition(":")
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
