#!/usr/bin/python3
"""Static checks of deploy/docker/Dockerfile.{cpu,cuda} and deploy/compose.yaml.

Docker cannot run on the build machines, so this reads the files instead:
  * every FROM names an image with an explicit tag that is not `latest`
    (an ARG in the tag is resolved from its default), and names its stage;
  * each file has a build stage and a final stage, COPY --from names an
    earlier stage, and the final stage switches to a USER that is not root;
  * each has a <Dockerfile>.dockerignore keeping .git and build trees out
    of the context;
  * TLS: the build stage installs libssl-dev (CMake requires OpenSSL) and
    the final stage gets libssl3 (by name, or through the .deb's Depends);
  * compose.yaml parses, has a coordinator and two workers, every service's
    image is the CPU image the coordinator builds, the coordinator listens
    beyond loopback inside its container, and each worker points at the
    coordinator's service name and port and has a unique --name;
  * compose is secure: no service runs --insecure; each worker has the CA
    (TRAINCTL_CA_CERT or --ca-cert) from a volume it mounts read-only, its
    own --state-dir, no join token and not the join token's volume, and
    never mounts the coordinator's state volume (the CA key); its one-shot
    join-<worker> service (--join-only, the same name, slots and state
    volume) reads the CA and the token from read-only volumes; coordinator
    and join services wait for a one-shot init service that makes the
    files and copies the CA certificate and join token, and never
    tls/ca.key, out of the coordinator's volume.
Exits non-zero with one line per problem.
"""

import os
import re
import shlex
import sys

import yaml

SOURCE = os.environ.get("TRAINCTL_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def logical_lines(path):
    """Dockerfile instructions with continuations joined, comments dropped."""
    lines, current = [], ""
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not current and line.lstrip().startswith("#"):
                continue
            if line.endswith("\\"):
                current += line[:-1] + " "
                continue
            current += line
            if current.strip():
                lines.append(current.strip())
            current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def check_dockerfile(name):
    before = len(problems)
    path = os.path.join(SOURCE, "deploy", "docker", name)
    args = {}          # ARG defaults declared before the first FROM
    stages = []        # stage names, in order
    user = {}          # stage -> last USER
    installs = {}      # stage -> the words after `apt-get install`
    for line in logical_lines(path):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not stages:
            key, _, value = rest.partition("=")
            args[key.strip()] = value.strip().strip('"')
        elif keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            if len(words) != 3 or words[1].upper() != "AS":
                problem(name, f"FROM without a stage name: {line}")
                continue
            image = re.sub(r"\$\{(\w+)\}",
                           lambda m: args.get(m.group(1), "<unset>"), words[0])
            if "<unset>" in image:
                problem(name, f"FROM uses an ARG with no default: {line}")
            repo, _, tag = image.rpartition(":")
            if not repo or "/" in tag:
                problem(name, f"image without a tag: {image}")
            elif tag == "latest":
                problem(name, f"image tagged latest: {image}")
            stages.append(words[2])
        elif keyword == "COPY" and "--from=" in rest:
            source = re.search(r"--from=(\S+)", rest).group(1)
            if source not in stages[:-1]:
                problem(name, f"COPY --from={source} names no earlier stage")
        elif keyword == "USER" and stages:
            user[stages[-1]] = rest.strip()
        elif keyword == "RUN" and stages and "apt-get install" in rest:
            installs.setdefault(stages[-1], []).extend(
                rest.split("apt-get install", 1)[1].split("&&")[0].split())
    ignore = path + ".dockerignore"
    patterns = open(ignore).read().split() if os.path.exists(ignore) else []
    if not {".git", "build", "build-*"} <= set(patterns):
        problem(name, f"{os.path.basename(ignore)} must keep .git and the "
                "build trees out of the context (the repository root)")
    if len(stages) < 2:
        problem(name, f"not a multi-stage build (stages: {stages})")
        return
    if "libssl-dev" not in installs.get(stages[0], []):
        problem(name, f"build stage {stages[0]} does not install libssl-dev "
                "(OpenSSL, for TLS)")
    final = installs.get(stages[-1], [])
    if not any(p.startswith("libssl3") or p.endswith(".deb") for p in final):
        problem(name, f"final stage {stages[-1]} installs no libssl3 (nor the "
                ".deb, which depends on it)")
    final_user = user.get(stages[-1])
    if final_user is None:
        problem(name, f"final stage {stages[-1]} runs as root (no USER)")
    elif final_user.split(":")[0] in ("root", "0"):
        problem(name, f"final stage {stages[-1]} has USER {final_user}")
    if len(problems) == before:
        print(f"ok: {name}: stages {stages}, final USER {final_user}")


def flag(command, name):
    """The value after `name` in an argv list, or None."""
    if name in command:
        i = command.index(name)
        return command[i + 1] if i + 1 < len(command) else None
    return None


def check_compose():
    before = len(problems)
    path = os.path.join(SOURCE, "deploy", "compose.yaml")
    with open(path, encoding="utf-8") as f:
        compose = yaml.safe_load(f)
    services = compose.get("services", {})
    coordinator = services.get("coordinator")
    workers = {k: v for k, v in services.items() if k.startswith("worker")}
    if coordinator is None or len(workers) != 2:
        problem("compose.yaml",
                f"want a coordinator and two workers, have {sorted(services)}")
        return
    build = coordinator.get("build", {})
    if build.get("dockerfile") != "deploy/docker/Dockerfile.cpu":
        problem("compose.yaml", "coordinator does not build Dockerfile.cpu")
    elif not os.path.isfile(os.path.join(os.path.dirname(path),
                                         build.get("context", "."),
                                         build["dockerfile"])):
        problem("compose.yaml", "build context + dockerfile is not a file")
    image = coordinator.get("image")
    command = coordinator.get("command", [])
    if not command or command[0] != "trainctl-coordinator":
        problem("compose.yaml", f"coordinator command is {command}")
    listen = flag(command, "--listen") or ""
    if not listen.startswith("0.0.0.0:"):
        problem("compose.yaml", f"coordinator --listen {listen!r} is not "
                "reachable from the workers' containers")
    port = listen.rpartition(":")[2]
    names = set()
    for name, worker in workers.items():
        if worker.get("image") != image:
            problem("compose.yaml", f"{name} image {worker.get('image')} "
                    f"is not the coordinator's {image}")
        wcommand = worker.get("command", [])
        if isinstance(wcommand, str):
            wcommand = shlex.split(wcommand)
        if not wcommand or wcommand[0] != "trainctl-worker":
            problem("compose.yaml", f"{name} command is {wcommand}")
        target = flag(wcommand, "--coordinator") or \
            worker.get("environment", {}).get("TRAINCTL_COORDINATOR")
        if target != f"coordinator:{port}":
            problem("compose.yaml", f"{name} dials {target}, not "
                    f"coordinator:{port}")
        if "coordinator" not in (worker.get("depends_on") or []):
            problem("compose.yaml", f"{name} does not depend on coordinator")
        wname = flag(wcommand, "--name")
        if not wname or wname in names:
            problem("compose.yaml", f"{name}: missing or repeated --name")
        names.add(wname)
    check_compose_security(services, coordinator, workers)
    if len(problems) == before:
        print(f"ok: compose.yaml: coordinator + {sorted(workers)} on {image}, "
              "TLS with a join token from init")


def volume_mounts(service):
    """{mount path: (source, read_only)} of a service's short-form volumes."""
    mounts = {}
    for v in service.get("volumes", []):
        parts = v.split(":")
        if len(parts) >= 2:
            mounts[parts[1]] = (parts[0], parts[2:] == ["ro"])
    return mounts


def check_compose_security(services, coordinator, workers):
    for name, service in services.items():
        command = service.get("command", [])
        if "--insecure" in (command if isinstance(command, list)
                            else shlex.split(command)):
            problem("compose.yaml", f"{name} runs --insecure")
    init = services.get("init")
    if init is None:
        problem("compose.yaml", "no one-shot init service makes the cluster "
                "files before the coordinator and workers start")
        return
    script = " ".join(init.get("command", []))
    if "trainctl-coordinator init" not in script or "--san coordinator" \
            not in script:
        problem("compose.yaml", "init does not run `trainctl-coordinator "
                "init ... --san coordinator` (the name workers dial)")
    if "ca.key" in script:
        problem("compose.yaml", "init touches tls/ca.key; only ca.crt and "
                "join.token may leave the coordinator's volume")
    state_volume = volume_mounts(coordinator).get(
        flag(coordinator.get("command", []), "--state-dir"), ("?",))[0]
    # The volume init copies the join token to: only join services mount it.
    init_mounts = volume_mounts(init)
    token_dirs = [m for m in init_mounts if f"{m}/join.token" in script]
    token_volume = init_mounts[token_dirs[0]][0] if token_dirs else None
    if token_volume is None:
        problem("compose.yaml", "init copies join.token to no volume")
    joins = {n: v for n, v in services.items() if n.startswith("join-")}

    def waits_for(service, other):
        return (service.get("depends_on") or {}).get(other, {}).get(
            "condition") == "service_completed_successfully"

    for name, service in [("coordinator", coordinator), *joins.items()]:
        if not waits_for(service, "init"):
            problem("compose.yaml", f"{name} does not wait for init to "
                    "complete")
    for name, worker in workers.items():
        env = worker.get("environment", {})
        command = worker.get("command", [])
        mounts = volume_mounts(worker)
        ca = flag(command, "--ca-cert") or env.get("TRAINCTL_CA_CERT")
        on_read_only_volume(name, "CA certificate", ca, mounts)
        # The join token is the join service's alone (security review C1):
        # neither the agent nor the jobs it runs can read it.
        if flag(command, "--join-token-file") or "--join-token" in command \
                or env.get("TRAINCTL_JOIN_TOKEN_FILE") or \
                env.get("TRAINCTL_JOIN_TOKEN"):
            problem("compose.yaml", f"{name} is given the join token")
        if any(src == token_volume for src, _ in mounts.values()):
            problem("compose.yaml", f"{name} mounts the join token's volume "
                    f"{token_volume}")
        if any(src == state_volume for src, _ in mounts.values()):
            problem("compose.yaml", f"{name} mounts the coordinator's state "
                    f"volume {state_volume} (the CA key)")
        state = flag(command, "--state-dir")
        if not state:
            problem("compose.yaml", f"{name} has no --state-dir for its "
                    "certificate")
        join = joins.get(f"join-{name}")
        if join is None or not waits_for(worker, f"join-{name}"):
            problem("compose.yaml", f"{name} does not wait for a one-shot "
                    f"join-{name} service")
            continue
        jcommand = join.get("command", [])
        jenv = join.get("environment", {})
        jmounts = volume_mounts(join)
        if "--join-only" not in jcommand:
            problem("compose.yaml", f"join-{name} does not run --join-only")
        for f in ("--name", "--slots", "--state-dir"):
            if flag(jcommand, f) != flag(command, f):
                problem("compose.yaml", f"join-{name} {f} is not {name}'s")
        on_read_only_volume(f"join-{name}", "CA certificate",
                            flag(jcommand, "--ca-cert") or
                            jenv.get("TRAINCTL_CA_CERT"), jmounts)
        on_read_only_volume(f"join-{name}", "join token file",
                            flag(jcommand, "--join-token-file") or
                            jenv.get("TRAINCTL_JOIN_TOKEN_FILE"), jmounts)
        state_mount = [m for m in mounts if state and state.startswith(m)]
        jstate_mount = [m for m in jmounts if state and state.startswith(m)]
        if not state_mount or not jstate_mount or \
                mounts[state_mount[0]][0] != jmounts[jstate_mount[0]][0]:
            problem("compose.yaml", f"join-{name} does not write {name}'s "
                    "state volume")


def on_read_only_volume(name, what, path, mounts):
    where = [m for m in mounts if path and path.startswith(m + "/")]
    if not where or not mounts[where[0]][1]:
        problem("compose.yaml", f"{name}: its {what} {path!r} is not on a "
                "volume mounted read-only")


check_dockerfile("Dockerfile.cpu")
check_dockerfile("Dockerfile.cuda")
check_compose()
if problems:
    print("\n".join("FAIL: " + p for p in problems), file=sys.stderr)
    sys.exit(1)
