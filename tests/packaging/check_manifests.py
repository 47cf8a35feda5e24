#!/usr/bin/env python3
"""Checks the Kubernetes manifests in deploy/kubernetes for the fields that matter: they
parse, the kustomization lists them all, the StatefulSet's probes are /healthz and
/readyz on the port the server listens on, with a Host the server accepts, every
container has requests and limits, one server per node, no hostPath volume, the security
contexts, the state dir on a claim, the audit shipped by a sidecar, the Ingress's hash
key (a request flow of each MCP era, the 2026-07-28 one with its Mcp-Param-Sandbox header,
keeps one key from the request that makes the session or sandbox handle to the last one
that uses it) and SSE settings, and that the policies in the ConfigMap load in mcpcell itself with
the Secret's secret sources in place.
Usage: check_manifests.py MANIFEST_DIR [MCPCELL_BINARY]"""
import os
import re
import subprocess
import sys
import tempfile
import tomllib

import yaml

# hostPath volumes the docs justify, by name: none. The state dir is a claim.
HOSTPATH_ALLOWED = set()
NAMESPACE = "mcpcell"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def load(directory):
    """{(kind, name): manifest} of every document of every .yaml file but kustomization."""
    objs, files = {}, []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".yaml") or name == "kustomization.yaml":
            continue
        files.append(name)
        with open(os.path.join(directory, name)) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                meta = doc.get("metadata", {})
                if check(doc.get("apiVersion") and doc.get("kind") and meta.get("name"),
                         f"{name}: a document without apiVersion, kind or metadata.name"):
                    if doc["kind"] != "Namespace":
                        check(meta.get("namespace") == NAMESPACE,
                              f"{name}: {doc['kind']} {meta['name']} not in namespace {NAMESPACE}")
                    objs[(doc["kind"], meta["name"])] = doc
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        kust = yaml.safe_load(f)
    check(sorted(kust.get("resources", [])) == files,
          f"kustomization.yaml resources {kust.get('resources')} != the files {files}")
    return objs


def one(objs, kind):
    found = [o for (k, _), o in objs.items() if k == kind]
    check(len(found) == 1, f"expected exactly one {kind}, found {len(found)}")
    return found[0] if found else {}


def flag(args, name):
    """The value of --name=VALUE in a container's args."""
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    failures.append(f"mcpcell container args lack {name}=...")
    return ""


def secret_data(objs, name):
    s = objs.get(("Secret", name), {})
    check(s, f"Secret {name} is referenced but not defined")
    return s.get("stringData", {})


def check_probes(c, port, hosts):
    want = {"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    check(port in ports.values(), f"no containerPort {port} (the --http port)")
    for probe, path in want.items():
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path, f"{probe} path {get.get('path')!r}, want {path}")
        check(ports.get(get.get("port"), get.get("port")) == port,
              f"{probe} port {get.get('port')!r} is not the server's port {port}")
        host = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}.get("Host")
        check(host in hosts, f"{probe} Host {host!r} is not in allowed_hosts {hosts}")


def check_resources(pod):
    for c in pod["containers"] + pod.get("initContainers", []):
        r = c.get("resources", {})
        for part in ("requests", "limits"):
            for res in ("cpu", "memory"):
                check(res in r.get(part, {}), f"container {c['name']}: resources.{part}.{res} unset")


def check_affinity(pod, labels):
    anti = pod.get("affinity", {}).get("podAntiAffinity", {})
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    check(any(t.get("topologyKey") == "kubernetes.io/hostname" and
              t.get("labelSelector", {}).get("matchLabels") == labels for t in terms),
          "no required podAntiAffinity on kubernetes.io/hostname for the servers' labels")
    node = pod.get("affinity", {}).get("nodeAffinity", {})
    check(node.get("requiredDuringSchedulingIgnoredDuringExecution"),
          "no required nodeAffinity (nodes labelled for cells)")


def check_volumes(sts, pod, objs):
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])}
    for name, v in vols.items():
        if "hostPath" in v:
            check(name in HOSTPATH_ALLOWED, f"volume {name} is a hostPath")
        if "configMap" in v:
            check(("ConfigMap", v["configMap"]["name"]) in objs, f"volume {name}: no such ConfigMap")
        if "secret" in v:
            check(("Secret", v["secret"]["secretName"]) in objs, f"volume {name}: no such Secret")
    for c in pod["containers"]:
        for m in c.get("volumeMounts", []):
            check(m["name"] in vols or m["name"] in claims,
                  f"container {c['name']} mounts {m['name']}, which is neither a volume nor a claim")
    return vols, claims


def mount_of(c, path):
    """The volumeMount whose mountPath is path."""
    return next((m for m in c.get("volumeMounts", []) if m["mountPath"] == path), None)


def check_security(pod, server, sidecars):
    check(pod.get("automountServiceAccountToken") is False, "the pod mounts a service account token")
    sc = server.get("securityContext", {})
    check(sc.get("runAsUser") == 0, "the server must run as root (it maps a uid range per cell)")
    check(sc.get("seccompProfile", {}).get("type") == "Unconfined",
          "the server needs seccompProfile Unconfined (mount, clone3, unshare for cells)")
    check(sc.get("readOnlyRootFilesystem") is True, "the server's root filesystem is writable")
    # The same set as the Containerfile's --cap-add (SETFCAP for doctor's uid-0 map probe),
    # so that the pod keeps what the server needs even without privileged.
    caps = sc.get("capabilities", {})
    wanted = {"SYS_ADMIN", "SETUID", "SETGID", "SETFCAP", "MKNOD", "DAC_OVERRIDE", "CHOWN",
              "FOWNER", "KILL"}
    check(caps.get("drop") == ["ALL"] and set(caps.get("add", [])) == wanted,
          f"the server's capabilities must be drop ALL, add {sorted(wanted)}; got {caps}")
    for c in sidecars:
        s = c.get("securityContext", {})
        check(not s.get("privileged") and s.get("allowPrivilegeEscalation") is False,
              f"sidecar {c['name']} may gain privileges")
        check(s.get("capabilities", {}).get("drop") == ["ALL"], f"sidecar {c['name']} keeps capabilities")
        check(s.get("readOnlyRootFilesystem") is True, f"sidecar {c['name']}: writable root")


def check_audit_shipper(sidecars, state_dir):
    audit_dir = state_dir + "/audit"
    ok = False
    for c in sidecars:
        m = mount_of(c, audit_dir)
        cmd = " ".join(c.get("command", []) + c.get("args", []))
        if m and m.get("readOnly") and m.get("subPath") == "audit" and \
                audit_dir + "/audit.jsonl" in cmd and "-F" in cmd:
            ok = True
    check(ok, f"no sidecar follows {audit_dir}/audit.jsonl (tail -F) from a read-only mount")


# What a client sends, request by request, in each era; the server makes the session id or
# sandbox handle while answering the first request of its flow, after the proxy chose a pod.
TOKEN = "Bearer tenant-token"
FLOWS = {
    "current era (Mcp-Session-Id)": [
        {"method": "POST", "path": "/mcp", "headers": {"Authorization": TOKEN}},  # initialize
        {"method": "POST", "path": "/mcp",
         "headers": {"Authorization": TOKEN, "Mcp-Session-Id": "6f1c0e"}},
        {"method": "GET", "path": "/mcp",
         "headers": {"Authorization": TOKEN, "Mcp-Session-Id": "6f1c0e"}},
        {"method": "DELETE", "path": "/mcp",
         "headers": {"Authorization": TOKEN, "Mcp-Session-Id": "6f1c0e"}},
    ],
    "2026-07-28 era (sandbox handle in Mcp-Param-Sandbox)": [
        {"method": "POST", "path": "/mcp", "headers": {"Authorization": TOKEN}},  # sandbox_create
        {"method": "POST", "path": "/mcp",
         "headers": {"Authorization": TOKEN, "Mcp-Param-Sandbox": "sbx-2b9e41"}},  # run_command
        {"method": "POST", "path": "/mcp",
         "headers": {"Authorization": TOKEN, "Mcp-Param-Sandbox": "sbx-2b9e41"}},
    ],
    "legacy HTTP+SSE": [
        {"method": "GET", "path": "/sse", "headers": {"Authorization": TOKEN}},
        {"method": "POST", "path": "/messages", "args": {"sessionId": "9a0d"},
         "headers": {"Authorization": TOKEN}},
    ],
}


def hash_key(expression, request):
    """The value of an nginx upstream-hash-by expression for one request: $http_NAME (a
    header, '-' as '_', any case), $arg_NAME, $uri, $request_method, text around them."""
    headers = {k.lower().replace("-", "_"): v for k, v in request["headers"].items()}

    def var(m):
        name = m.group(1) or m.group(2)
        if name.startswith("http_"):
            return headers.get(name[5:], "")
        if name.startswith("arg_"):
            return request.get("args", {}).get(name[4:], "")
        known = {"uri": request["path"], "request_method": request["method"]}
        if name in known:
            return known[name]
        failures.append(f"upstream-hash-by uses ${name}, which this check does not model")
        return ""

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", var, expression)


def check_routing(expression):
    """Every request of a flow must have the key of the flow's first request: that one
    reached the pod that made the session or handle, and consistent hashing sends equal
    keys to the same pod. A key that is empty for all of them sends everyone to one pod."""
    for name, flow in FLOWS.items():
        keys = [hash_key(expression, r) for r in flow]
        check(keys[0] != "", f"{name}: the hash key {expression!r} is empty on the first request, "
              "so every client's first request goes to one pod")
        for i, key in enumerate(keys[1:], 1):
            check(key == keys[0], f"{name}: request {i + 1} hashes on {key!r} but the request that "
                  f"made its session or handle hashed on {keys[0]!r} ({expression!r}): it would "
                  "reach another pod, which does not hold it")


def check_ingress(objs, svc_name, hosts):
    ing = one(objs, "Ingress")
    ann = ing.get("metadata", {}).get("annotations", {})
    check(ann.get("nginx.ingress.kubernetes.io/upstream-hash-by") == "$http_authorization",
          "the Ingress does not hash on the bearer token (upstream-hash-by)")
    check_routing(ann.get("nginx.ingress.kubernetes.io/upstream-hash-by", ""))
    # A canary or a snippet would route some requests (say, by Mcp-Param-Sandbox) past the
    # hash; the docs say why there is none.
    for key in ann:
        check("canary" not in key and "snippet" not in key,
              f"Ingress annotation {key} routes requests outside the hash (docs/kubernetes.md)")
    check(ann.get("nginx.ingress.kubernetes.io/proxy-buffering") == "off", "proxy buffering is on (SSE)")
    check(int(ann.get("nginx.ingress.kubernetes.io/proxy-read-timeout", "60")) >= 600,
          "proxy-read-timeout under 10 minutes cuts long calls and GET streams")
    paths = [p for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
    check(any(p["path"] == "/mcp" for p in paths), "the Ingress has no /mcp path")
    for p in paths:
        check(p["backend"]["service"]["name"] == svc_name, f"path {p['path']}: backend is not {svc_name}")
    for r in ing["spec"]["rules"]:
        check(r.get("host") in hosts, f"Ingress host {r.get('host')!r} not in allowed_hosts {hosts}")


def check_policies(binary, objs, policy_paths, secrets):
    """Each policy the server or a tenant names is a ConfigMap key and loads in mcpcell,
    with the Secret's secret sources at the path the policies name."""
    data = objs.get(("ConfigMap", "mcpcell-policies"), {}).get("data", {})
    with tempfile.TemporaryDirectory() as tmp:
        secret_dir = os.path.join(tmp, "secrets")
        os.mkdir(secret_dir)
        for key, value in secrets.items():
            with open(os.path.join(secret_dir, key), "w") as f:
                f.write(value)
        for path in sorted(policy_paths):
            key = os.path.basename(path)
            if not check(path.startswith("/etc/mcpcell/policies/") and key in data,
                         f"policy {path} is not a key of ConfigMap mcpcell-policies"):
                continue
            if not binary:
                continue
            file = os.path.join(tmp, key)
            with open(file, "w") as f:
                f.write(data[key].replace("/etc/mcpcell/secrets/", secret_dir + "/"))
            r = subprocess.run([binary, "policy", "check", file], capture_output=True, text=True)
            check(r.returncode == 0, f"mcpcell policy check {key}: {r.stderr.strip()}")


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    binary = sys.argv[2] if len(sys.argv) == 3 else ""
    objs = load(sys.argv[1])
    sts, svc = one(objs, "StatefulSet"), objs.get(("Service", "mcpcell-headless"), {})
    pod = sts["spec"]["template"]["spec"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    check(sts["spec"]["selector"]["matchLabels"] == labels, "selector does not match the pod labels")
    check(sts["spec"].get("serviceName") == "mcpcell-headless" and
          svc.get("spec", {}).get("clusterIP") == "None" and svc["spec"].get("selector") == labels,
          "the StatefulSet's service is not a headless Service selecting its pods")
    server = next(c for c in pod["containers"] if c["name"] == "mcpcell")
    sidecars = [c for c in pod["containers"] if c is not server]
    args = server["args"]
    check(args[0] == "serve", "the server container does not run `serve`")
    http_config_path, state_dir = flag(args, "--http-config"), flag(args, "--state-dir")
    http_config = tomllib.loads(secret_data(objs, "mcpcell-http-config").get(
        os.path.basename(http_config_path), ""))
    check(mount_of(server, os.path.dirname(http_config_path)), "--http-config is not on a mount")
    hosts = http_config.get("http", {}).get("allowed_hosts", [])
    # The hash key is the bearer token: without tokens every request has the same key.
    check(http_config.get("tenant") and all(t.get("token_sha256") for t in http_config["tenant"]),
          "the HTTP config has no tenant tokens, so the Ingress's hash sends everything to one pod")
    check_probes(server, int(flag(args, "--http").rsplit(":", 1)[1]), hosts)
    check_resources(pod)
    check_affinity(pod, labels)
    _, claims = check_volumes(sts, pod, objs)
    state = mount_of(server, state_dir)
    check(state and state["name"] in claims, f"--state-dir {state_dir} is not on a volume claim")
    check_security(pod, server, sidecars)
    check_audit_shipper(sidecars, state_dir)
    check(pod.get("terminationGracePeriodSeconds", 30) >= 30, "too short a grace period to end cells")
    check_ingress(objs, "mcpcell-headless", hosts)
    pdb = one(objs, "PodDisruptionBudget")
    check(pdb.get("spec", {}).get("selector", {}).get("matchLabels") == labels, "the PDB selects no servers")
    policies = {flag(args, "--policy")} | {t["policy"] for t in http_config.get("tenant", [])}
    check_policies(binary, objs, policies, secret_data(objs, "mcpcell-secret-sources"))
    if failures:
        print("check_manifests: " + str(len(failures)) + " problem(s):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        sys.exit(1)
    print(f"check_manifests: {len(objs)} objects, every check passed")


if __name__ == "__main__":
    main()
