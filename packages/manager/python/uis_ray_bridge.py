#!/usr/bin/env python3
"""Ray driver for the Unified Inference Service manager.

Ray has no TypeScript API, so the manager's Ray launcher runs this process and talks to it over stdio in JSON
lines: one request `{"id", "method", "params"}` gets exactly one response `{"id", "ok", "result" | "error"}`;
events with no id (`ready`, `actor_exit`) are pushed as they happen. Requests run concurrently, so a slow
placement-group wait never holds up a stop.

Ownership is enforced here as well as in TypeScript: only placement groups this driver created can be removed by
it; named groups it merely looked up (external services, the training controller) are never touched.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

# The protocol owns the real stdout; anything Ray or a library prints goes to stderr instead.
_PROTO = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

import ray  # noqa: E402
from ray.util.placement_group import (  # noqa: E402
    get_placement_group,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: E402

_write_lock = threading.Lock()


def emit(msg: dict) -> None:
    line = json.dumps(msg, separators=(",", ":"))
    with _write_lock:
        _PROTO.write(line + "\n")
        _PROTO.flush()


class BridgeError(Exception):
    def __init__(self, code: str, message: str, path: str | None = None):
        super().__init__(message)
        self.code = code
        self.path = path


# ---- remote code ---------------------------------------------------------------------------------------------------


@ray.remote(num_cpus=0.01, num_gpus=0.01, max_retries=0)
def _probe_bundle(index: int) -> dict:
    """Where one bundle landed (Relax's probe: node id, node IP and the GPU Ray gives a task on the bundle)."""
    gpus = ray.get_gpu_ids()
    return {
        "bundle_index": index,
        "node_id": ray.get_runtime_context().get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "gpu_id": int(gpus[0]) if gpus else -1,
    }


@ray.remote(num_cpus=0.01, max_retries=0)
def _free_ports(count: int, host: str) -> list:
    """`count` distinct free ports on the node the task runs on (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent() -> None:
    """Runs in the child before exec: own process group (stop kills it whole) and SIGKILL when the actor dies,
    so an actor killed through Ray never leaves an engine behind."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: stop() still kills the group
        pass


@ray.remote(max_restarts=0, max_task_retries=0, max_concurrency=4)
class EngineProcess:
    """One node process of one engine replica, pinned to its bundle. Runs the given argv as a subprocess."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lines: collections.deque = collections.deque(maxlen=2000)

    def start(self, argv: list, env: dict, cwd: str | None) -> dict:
        full_env = dict(os.environ)
        full_env.update(env)
        self.proc = subprocess.Popen(
            argv,
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        return {
            "pid": self.proc.pid,
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "gpu_ids": [int(g) for g in ray.get_gpu_ids()],
        }

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait(self) -> dict:
        """Returns when the process exits (the bridge watches this call to learn of exits and actor deaths)."""
        assert self.proc is not None
        code = self.proc.wait()
        time.sleep(0.1)  # let the pump take the last lines
        tail = list(self.lines)[-50:]
        if code < 0:
            return {"code": None, "signal": signal.Signals(-code).name, "tail": tail}
        return {"code": code, "signal": None, "tail": tail}

    def stop(self, grace_s: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def tail(self, n: int) -> list:
        return list(self.lines)[-n:]


# ---- driver state --------------------------------------------------------------------------------------------------


class Bridge:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.lock = threading.Lock()
        # PGs this driver created (name -> PlacementGroup): the only ones it may remove.
        self.owned: dict = {}
        # Named PGs looked up (external / controller-owned): used, never removed.
        self.borrowed: dict = {}
        # handle -> {"actor", "wait", "stopping", "label"}
        self.actors: dict = {}
        self.seq = 0
        self.closing = False

    # -- placement groups --

    def _pg(self, name: str):
        with self.lock:
            pg = self.owned.get(name) or self.borrowed.get(name)
        if pg is not None:
            return pg
        try:
            pg = get_placement_group(name)
        except ValueError:
            raise BridgeError("pg_not_found", f"no placement group named {name!r} in namespace {self.namespace!r}", "pg")
        with self.lock:
            self.borrowed[name] = pg
        return pg

    def create_pg(self, p: dict) -> dict:
        name = p["name"]
        bundles = p["bundles"]
        if not bundles:
            raise BridgeError("invalid_bundles", "a placement group needs at least one bundle", "bundles")
        try:
            get_placement_group(name)
            raise BridgeError("pg_exists", f"a placement group named {name!r} already exists", "name")
        except ValueError:
            pass
        pg = placement_group(bundles, strategy=p["strategy"], name=name)
        with self.lock:
            self.owned[name] = pg
        timeout = float(p.get("timeout_s", 60))
        try:
            ray.get(pg.ready(), timeout=timeout)
        except Exception as e:  # noqa: BLE001 - infeasible or slow: give the capacity back and say why
            self._remove_owned(name)
            raise BridgeError(
                "pg_not_ready", f"placement group {name!r} ({len(bundles)} bundles) not ready in {timeout}s: {e}", "pg"
            )
        return {"name": name, "id": pg.id.hex(), "bundle_count": len(bundles)}

    def get_pg(self, p: dict) -> dict:
        pg = self._pg(p["name"])
        timeout = float(p.get("timeout_s", 60))
        try:
            ray.get(pg.ready(), timeout=timeout)
        except Exception as e:  # noqa: BLE001
            raise BridgeError("pg_not_ready", f"placement group {p['name']!r} not ready in {timeout}s: {e}", "pg")
        return {"name": p["name"], "id": pg.id.hex(), "bundle_count": pg.bundle_count, "owned": p["name"] in self.owned}

    def pg_exists(self, p: dict) -> dict:
        try:
            get_placement_group(p["name"])
            return {"exists": True}
        except ValueError:
            return {"exists": False}

    def _remove_owned(self, name: str) -> None:
        with self.lock:
            pg = self.owned.pop(name, None)
        if pg is not None:
            remove_placement_group(pg)

    def remove_pg(self, p: dict) -> dict:
        name = p["name"]
        with self.lock:
            owned = name in self.owned
        if not owned:
            raise BridgeError("pg_not_owned", f"placement group {name!r} was not created by this manager", "name")
        self._remove_owned(name)
        return {"removed": name}

    def probe(self, p: dict) -> dict:
        pg = self._pg(p["name"])
        refs = [
            _probe_bundle.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)
            ).remote(i)
            for i in range(pg.bundle_count)
        ]
        return {"bundles": ray.get(refs, timeout=float(p.get("timeout_s", 120)))}

    def free_ports(self, p: dict) -> dict:
        # Inside the bundle: the PG holds its node's CPUs, so a task outside it might never be scheduled.
        pg = self._pg(p["pg"])
        ref = _free_ports.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=int(p["bundle_index"])
            )
        ).remote(int(p["count"]), p.get("host", "0.0.0.0"))
        return {"ports": ray.get(ref, timeout=float(p.get("timeout_s", 60)))}

    # -- engine processes --

    def start_process(self, p: dict) -> dict:
        pg = self._pg(p["pg"])
        with self.lock:
            self.seq += 1
            handle = f"{p.get('label', 'engine')}#{self.seq}"
        actor = EngineProcess.options(
            name=f"uis:{handle}",
            num_cpus=float(p.get("num_cpus", 0.01)),
            num_gpus=float(p["num_gpus"]),
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=int(p["bundle_index"])
            ),
        ).remote()
        with self.lock:
            self.actors[handle] = {"actor": actor, "wait": None, "stopping": False}
        try:
            info = ray.get(actor.start.remote(p["argv"], p.get("env", {}), p.get("cwd")), timeout=float(p.get("timeout_s", 120)))
        except Exception as e:  # noqa: BLE001 - actor could not be placed or the command could not start
            self._kill(handle)
            raise BridgeError("process_start_failed", f"{handle}: {e}", "argv")
        with self.lock:
            self.actors[handle]["wait"] = actor.wait.remote()
        return {"handle": handle, "actor_name": f"uis:{handle}", **info}

    def _kill(self, handle: str) -> None:
        with self.lock:
            entry = self.actors.pop(handle, None)
        if entry is not None:
            try:
                ray.kill(entry["actor"], no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass

    def stop_process(self, p: dict) -> dict:
        handle = p["handle"]
        with self.lock:
            entry = self.actors.get(handle)
            if entry is not None:
                entry["stopping"] = True
        if entry is None:
            return {"stopped": handle, "known": False}
        try:
            ray.get(entry["actor"].stop.remote(float(p.get("grace_s", 10))), timeout=float(p.get("grace_s", 10)) + 30)
        except Exception:  # noqa: BLE001 - the actor is gone already; killing it below is all that is left
            pass
        self._kill(handle)
        return {"stopped": handle, "known": True}

    def tail(self, p: dict) -> dict:
        with self.lock:
            entry = self.actors.get(p["handle"])
        if entry is None:
            return {"lines": []}
        try:
            return {"lines": ray.get(entry["actor"].tail.remote(int(p.get("lines", 100))), timeout=10)}
        except Exception:  # noqa: BLE001
            return {"lines": []}

    def state(self, _p: dict) -> dict:
        """What Ray's GCS says about PGs and actors of this namespace (tests assert ownership through this)."""
        pgs = [
            {"name": v.get("name", ""), "state": v.get("state", "")}
            for v in placement_group_table().values()
        ]
        actors = []
        for a in ray._private.state.actors().values():  # noqa: SLF001 - GCS table without the dashboard
            actors.append({"name": a.get("Name", ""), "state": a.get("State", "")})
        return {"placement_groups": pgs, "actors": actors}

    # -- watching --

    def watch(self) -> None:
        """Reports processes that exit, and actors that die, without having been asked to stop."""
        while not self.closing:
            with self.lock:
                waits = {e["wait"]: h for h, e in self.actors.items() if e["wait"] is not None}
            if not waits:
                time.sleep(0.2)
                continue
            done, _ = ray.wait(list(waits), num_returns=1, timeout=0.5)
            for ref in done:
                handle = waits[ref]
                try:
                    res = ray.get(ref)
                    event = {"event": "actor_exit", "handle": handle, "code": res["code"], "signal": res["signal"],
                             "reason": "process exited", "tail": res.get("tail", [])}
                except Exception as e:  # noqa: BLE001 - RayActorError: the actor (and so its process) died
                    event = {"event": "actor_exit", "handle": handle, "code": None, "signal": "SIGKILL",
                             "reason": f"actor died: {type(e).__name__}", "tail": []}
                with self.lock:
                    entry = self.actors.get(handle)
                    quiet = entry is None or entry["stopping"]
                    if entry is not None:
                        entry["wait"] = None
                if not quiet:
                    self._kill(handle)
                    emit(event)

    def close(self) -> None:
        self.closing = True
        with self.lock:
            handles = list(self.actors)
            for h in handles:
                self.actors[h]["stopping"] = True
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda h: self.stop_process({"handle": h, "grace_s": 5}), handles))
        with self.lock:
            names = list(self.owned)
        for n in names:
            try:
                self._remove_owned(n)
            except Exception:  # noqa: BLE001
                traceback.print_exc()


METHODS = {
    "create_pg": Bridge.create_pg,
    "get_pg": Bridge.get_pg,
    "pg_exists": Bridge.pg_exists,
    "remove_pg": Bridge.remove_pg,
    "probe": Bridge.probe,
    "free_ports": Bridge.free_ports,
    "start_process": Bridge.start_process,
    "stop_process": Bridge.stop_process,
    "tail": Bridge.tail,
    "state": Bridge.state,
}


def serve(bridge: Bridge, req: dict) -> None:
    rid = req.get("id")
    method = METHODS.get(req.get("method", ""))
    try:
        if method is None:
            raise BridgeError("unknown_method", f"unknown method {req.get('method')!r}", "method")
        result = method(bridge, req.get("params") or {})
        emit({"id": rid, "ok": True, "result": result})
    except BridgeError as e:
        emit({"id": rid, "ok": False, "error": {"code": e.code, "message": str(e), "path": e.path}})
    except KeyError as e:
        emit({"id": rid, "ok": False, "error": {"code": "bad_params", "message": f"missing parameter {e}", "path": str(e)}})
    except Exception as e:  # noqa: BLE001 - any Ray failure is an answer, never a crash of the bridge
        traceback.print_exc()
        emit({"id": rid, "ok": False, "error": {"code": "ray_error", "message": f"{type(e).__name__}: {e}", "path": None}})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--namespace", default="uis")
    args = ap.parse_args()
    try:
        ray.init(address=args.address, namespace=args.namespace, logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # noqa: BLE001
        emit({"event": "fatal", "code": "ray_connect_failed", "message": f"{type(e).__name__}: {e}"})
        return 1
    bridge = Bridge(args.namespace)
    watcher = threading.Thread(target=bridge.watch, daemon=True)
    watcher.start()
    emit({"event": "ready", "ray_version": ray.__version__, "namespace": args.namespace,
          "nodes": sum(1 for n in ray.nodes() if n.get("Alive"))})
    pool = ThreadPoolExecutor(max_workers=32)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as e:
            emit({"id": None, "ok": False, "error": {"code": "bad_json", "message": str(e), "path": None}})
            continue
        if req.get("method") == "shutdown":
            break
        pool.submit(serve, bridge, req)
    # stdin closed or shutdown asked: stop what we started, remove what we created, then leave.
    pool.shutdown(wait=False, cancel_futures=True)
    bridge.close()
    watcher.join(timeout=5)
    emit({"event": "closed"})
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
