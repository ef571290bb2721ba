"""Fuzz ``ember.load``: every input must load or raise ``ember.SerializationError`` in bounded time and memory.

Usage and the target interface: ``fuzz/README.md``. Each target runs in a worker
subprocess (``--worker``) whose address space is capped with ``RLIMIT_AS``; the parent
watches it, kills it when it stops answering, reports the input it was on, and starts
a fresh worker for the rest of the target's time. Exit status: 0 when nothing was
found, 1 otherwise (2 for bad usage).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import queue
import random
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGETS_DIR = HERE / "targets"
CRASH_DIR = HERE / "crashes"

# A worker reports at least this often; one silent for much longer is stuck in C code.
_PROGRESS_EVERY_S = 0.5
# Successfully loaded mutants kept as further starting points (per worker).
_POOL_SIZE = 256
# Mutants larger than this are dropped (repeated duplications could grow them without bound).
_MAX_INPUT_BYTES = 4 * 1024 * 1024


# --------------------------------------------------------------------------- targets


def target_names() -> list[str]:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.py") if not p.stem.startswith("_"))


def import_target(name: str):
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    module = importlib.import_module(f"targets.{name}")
    for attr in ("NAME", "seeds", "load"):
        if not hasattr(module, attr):
            raise TypeError(f"fuzz target {name!r} lacks {attr!r} (see fuzz/README.md)")
    return module


# --------------------------------------------------------------------------- mutations

_INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, ord("{"), ord("}"), ord('"'), ord("["), ord(","), ord("\\"))
_INTERESTING_INTS = (
    -1,
    0,
    1,
    2,
    7,
    8,
    63,
    64,
    65,
    255,
    2**31,
    2**32 - 1,
    2**53 + 1,
    2**62,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**400,
    -(10**400),
)
_INTERESTING_STRINGS = (
    "",
    "t",
    "tensor",
    "dict",
    "odict",
    "counter",
    "tuple",
    "size",
    "set",
    "frozenset",
    "bytes",
    "ndarray",
    "npscalar",
    "dtype",
    "device",
    "ext",
    "float",
    "complex",
    "nan",
    "inf",
    "-inf",
    "float32",
    "F32",
    "U8",
    "BOOL",
    "C64",
    "uint64",
    "bfloat16",
    "object",
    "cpu",
    "cuda:0",
    "meta",
    "cuda:99999999999999999999",
    "__metadata__",
    "ember.structure",
    "ember.fx.GraphModule",
    "ember.sparse.SparseTensor",
    "\udcff",
    "\x00",
    "a" * 1000,
)


def _random_value(rng: random.Random, strings: list[str], depth: int = 0):
    """A JSON value of a random type: the kind of thing an attacker puts where another was expected."""
    choice = rng.randrange(10 if depth < 3 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.choice(_INTERESTING_INTS)
    if choice == 3:
        return rng.choice((0.5, -0.0, 1e308, -1e308, 5e-324, 1.5, 2.0**64))
    if choice == 4:
        return rng.choice(_INTERESTING_STRINGS)
    if choice == 5:
        return rng.choice(strings) if strings else "x"
    if choice == 6:
        return [_random_value(rng, strings, depth + 1) for _ in range(rng.randrange(4))]
    if choice == 7:
        return {rng.choice(strings or ["k"]): _random_value(rng, strings, depth + 1) for _ in range(rng.randrange(4))}
    if choice == 8:  # a tagged node of a random kind
        node = {"t": rng.choice(_INTERESTING_STRINGS[2:18])}
        for key in rng.sample(("v", "i", "items", "re", "im", "dtype", "shape", "type"), rng.randrange(1, 4)):
            node[key] = _random_value(rng, strings, depth + 1)
        return node
    nested = [None]  # deep nesting
    for _ in range(rng.choice((10, 100, 1000, 5000))):
        nested = [nested]
    return nested


def _containers(value, out):
    """Every list and dict inside ``value`` (iteratively: mutated values may be deep)."""
    stack = [value]
    while stack and len(out) < 100_000:
        node = stack.pop()
        if isinstance(node, (list, dict)):
            out.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return out


def _strings(value, out):
    stack = [value]
    while stack and len(out) < 10_000:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            out.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _mutate_json(doc, rng: random.Random) -> None:
    """Change one place in the JSON document ``doc`` (a dict) in place."""
    strings = _strings(doc, [])
    containers = _containers(doc, [])
    node = rng.choice(containers)
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    op = rng.randrange(6)
    if not keys or op == 0:  # add an entry
        if isinstance(node, dict):
            node[rng.choice(strings + list(_INTERESTING_STRINGS))] = _random_value(rng, strings)
        else:
            node.insert(rng.randrange(len(node) + 1), _random_value(rng, strings))
        return
    key = rng.choice(keys)
    if op == 1:  # replace a value with one of another type
        node[key] = _random_value(rng, strings)
    elif op == 2:  # remove an entry
        del node[key]
    elif op == 3:  # copy a value from elsewhere in the document
        other = rng.choice(containers)
        if other:
            other_key = rng.choice(list(other) if isinstance(other, dict) else range(len(other)))
            node[key] = json.loads(json.dumps(other[other_key]))  # a copy: no cycles
    elif op == 4 and isinstance(node[key], int) and not isinstance(node[key], bool):  # nudge a number
        node[key] = node[key] + rng.choice((-1, 1, -8, 8, 2**32, -(2**40))) if rng.random() < 0.7 else -node[key]
    elif op == 5 and isinstance(node, list):  # duplicate an element many times (a small one: bounded size)
        if len(json.dumps(node[key])) < 200:
            node.extend([node[key]] * rng.choice((1, 2, 100, 10_000)))
    else:
        node[key] = _random_value(rng, strings)


def split_file(data: bytes):
    """``(header dict, data bytes)`` of an ember/safetensors file, or None if ``data`` is not one."""
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        return None
    try:
        header = json.loads(data[8 : 8 + n])
    except (ValueError, RecursionError):
        return None
    return (header, data[8 + n :]) if isinstance(header, dict) else None


def canonical_checksum(header: dict) -> str:
    """``ember.header_sha256`` as the file format defines it (an attacker computes it the same way)."""
    metadata = {k: v for k, v in header.get("__metadata__", {}).items() if k != "ember.header_sha256"}
    canonical = {**header, "__metadata__": metadata}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def join_file(header: dict, data: bytes, *, fix_checksum: bool = True) -> bytes:
    metadata = header.get("__metadata__")
    if fix_checksum and isinstance(metadata, dict) and "ember.header_sha256" in metadata:
        try:
            metadata["ember.header_sha256"] = canonical_checksum(header)
        except (TypeError, ValueError, RecursionError):
            pass
    text = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogatepass")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


def mutate_structure(data: bytes, rng: random.Random) -> bytes | None:
    """A JSON-aware mutation of the header or of the ``ember.structure`` inside it, checksum recomputed."""
    parts = split_file(data)
    if parts is None:
        return None
    header, payload = parts
    metadata = header.get("__metadata__")
    structure_text = metadata.get("ember.structure") if isinstance(metadata, dict) else None
    try:
        if isinstance(structure_text, str) and rng.random() < 0.75:
            structure = json.loads(structure_text)
            if not isinstance(structure, dict):
                return None
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                _mutate_json(structure, rng)
            metadata["ember.structure"] = json.dumps(structure, separators=(",", ":"))
        else:
            for _ in range(rng.choice((1, 1, 2))):
                _mutate_json(header, rng)
        if rng.random() < 0.2:  # the data too: grow or shrink it
            payload = payload[: rng.randrange(len(payload) + 1)] if rng.random() < 0.5 else payload + payload
        return join_file(header, payload, fix_checksum=rng.random() < 0.95)
    except (ValueError, TypeError, RecursionError):
        return None


def mutate_bytes(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        n = len(buf)
        if op == 0 and n:  # bit flip
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            buf[rng.randrange(n)] = rng.choice(_INTERESTING_BYTES)
        elif op == 2:  # insert random bytes
            i = rng.randrange(n + 1)
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif op == 3 and n:  # delete a range
            i = rng.randrange(n)
            del buf[i : i + rng.randrange(1, 17)]
        elif op == 4 and n:  # truncate
            del buf[rng.randrange(n) :]
        elif op == 5 and n:  # duplicate a range
            i = rng.randrange(n)
            j = min(n, i + rng.randrange(1, 65))
            k = rng.randrange(n + 1)
            buf[k:k] = buf[i:j]
        elif op == 6 and pool:  # splice with another input
            other = rng.choice(pool)
            cut = rng.randrange(len(buf) + 1)
            buf = buf[:cut] + other[rng.randrange(len(other) + 1) :]
        elif op == 7 and n >= 8:  # the header length
            length = rng.choice((0, 1, 2, 7, 8, n - 8, n - 7, n, 2**31, 2**63, 2**64 - 1, 100_000_001))
            buf[:8] = (length % 2**64).to_bytes(8, "little")
    return bytes(buf)


def mutate(data: bytes, rng: random.Random, pool: list[bytes], target) -> bytes:
    roll = rng.random()
    custom = getattr(target, "mutate", None)
    if custom is not None and roll < 0.25:
        result = custom(data, rng)
        if result is not None:
            return result
    if roll < 0.7:
        result = mutate_structure(data, rng)
        if result is not None:
            return result
    return mutate_bytes(data, rng, pool)


# --------------------------------------------------------------------------- the worker


class _InputTimeout(BaseException):
    """Raised by the interval timer when one input runs past the time limit (a BaseException:
    a loader catching ``Exception`` must not swallow it)."""


def _on_alarm(signum, frame):
    raise _InputTimeout()


def _timed(seconds: float, fn, *args):
    """``fn(*args)``, raising :class:`_InputTimeout` once it has used ``seconds`` of CPU time.

    CPU time, not wall time: a worker starved by other processes (it runs at low priority
    on a busy machine) must not report slow inputs that are not slow.
    """
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) used so far by process ``pid``, or None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _address_space() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _limit_address_space(megabytes: int) -> None:
    """Let this process's address space grow by ``megabytes`` at most: beyond, allocations raise MemoryError."""
    limit = _address_space() + megabytes * 1024 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _emit(**message) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def save_finding(target_name: str, kind: str, data: bytes, details: str) -> Path:
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    stem = f"{target_name}-{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
    path = CRASH_DIR / f"{stem}.bin"
    path.write_bytes(data)
    (CRASH_DIR / f"{stem}.txt").write_text(details, encoding="utf-8")
    return path


def check_one(target, data: bytes, serialization_error) -> tuple[str, str] | None:
    """Run ``target.load(data)``; ``(kind, details)`` of a failure, or None when it loaded or raised properly."""
    try:
        target.load(data)
    except serialization_error:
        return None
    except _InputTimeout:
        return "timeout", "the input ran past the time limit"
    except MemoryError:
        return "memory", "MemoryError: the input made the loader exceed the memory limit\n" + traceback.format_exc()
    except Exception as exc:  # the finding: a wrong exception type
        return type(exc).__name__, traceback.format_exc()
    return None


def worker(args) -> int:
    """Fuzz one target until the deadline or the input count; report progress and findings on stdout."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    target = import_target(args.worker)
    import ember

    rng = random.Random(args.seed)
    seeds = list(target.seeds())
    if not seeds:
        raise SystemExit(f"fuzz target {args.worker!r} has no seeds")
    # Every seed must load: a target whose seeds fail tests nothing.
    for seed in seeds:
        target.load(seed)
    _limit_address_space(args.memory_limit)
    signal.signal(signal.SIGPROF, _on_alarm)
    current = Path(args.current)
    current.parent.mkdir(parents=True, exist_ok=True)
    pool = list(seeds)
    count, findings, signatures = 0, 0, set()
    last_report = time.monotonic()
    while time.monotonic() < args.deadline and count < args.max_inputs:
        try:
            data = _timed(args.time_limit, mutate, rng.choice(pool), rng, pool, target)
        except (_InputTimeout, MemoryError, RecursionError):
            continue  # a mutant too big to build: not an input
        if len(data) > _MAX_INPUT_BYTES:
            continue
        current.write_bytes(data)  # there while the loader runs on it: the parent reports it if we die
        try:
            failure = _timed(args.time_limit, check_one, target, data, ember.SerializationError)
        except _InputTimeout:  # the timer fired just after check_one returned
            failure = ("timeout", "the input ran past the time limit")
        current.unlink()
        count += 1
        if failure is None:
            if len(pool) < _POOL_SIZE + len(seeds):
                pool.append(data)
            elif rng.random() < 0.05:
                pool[rng.randrange(len(seeds), len(pool))] = data
        else:
            kind, details = failure
            findings += 1
            # One reproducer per distinct failure (exception type and where it was raised).
            signature = (kind, details.strip().splitlines()[-3] if details.count("\n") > 2 else details)
            if signature not in signatures:
                signatures.add(signature)
                path = save_finding(target.NAME, kind, data, details)
                _emit(finding=kind, file=str(path), error=details.strip().splitlines()[-1])
        now = time.monotonic()
        if now - last_report > _PROGRESS_EVERY_S:
            _emit(count=count, findings=findings)
            last_report = now
    _emit(count=count, findings=findings, done=True)
    return 0


# --------------------------------------------------------------------------- the parent


def _run_target(name: str, seconds: float, args) -> tuple[int, int, list[str]]:
    """Fuzz target ``name`` for ``seconds`` in worker processes; ``(inputs, findings, messages)``."""
    deadline = time.time() + seconds
    total, findings, messages = 0, 0, []
    seed = args.seed
    current = CRASH_DIR / f".current-{name}-{os.getpid()}"
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    process = None
    try:
        while time.time() < deadline and total < args.max_inputs:
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                name,
                "--seed",
                str(seed),
                "--deadline-monotonic-in",
                str(deadline - time.time()),
                "--max-inputs",
                str(args.max_inputs - total),
                "--time-limit",
                str(args.time_limit),
                "--memory-limit",
                str(args.memory_limit),
                "--current",
                str(current),
            ]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
            counted, done, worker_findings = 0, False, 0
            # Seeds are made and checked before the first report: allow for imports.
            patience = max(60.0, 3 * args.time_limit + 10)
            lines = queue.Queue()
            reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
            reader.start()
            killed = False
            cpu_at_message, silent_since = _cpu_seconds(process.pid) or 0.0, time.monotonic()
            while True:
                try:
                    line = lines.get(timeout=patience)
                except queue.Empty:
                    # Silent for too long: stuck in C code, where the timer cannot fire. Judged by the
                    # CPU time it used meanwhile (a starved worker is slow, not stuck), and by wall
                    # time only far beyond the bound (a worker blocked without using CPU).
                    cpu = _cpu_seconds(process.pid)
                    busy = cpu is None or cpu - cpu_at_message > patience
                    if busy or time.monotonic() - silent_since > 20 * patience:
                        process.kill()
                        killed = True
                        break
                    continue
                if line is None:  # the worker closed its output: it ended
                    break
                cpu_at_message, silent_since = _cpu_seconds(process.pid) or cpu_at_message, time.monotonic()
                message = json.loads(line)
                if "finding" in message:
                    messages.append(f"{name}: {message['finding']}: {message['error']} -> {message['file']}")
                    print(messages[-1], flush=True)
                    continue
                counted, worker_findings = message["count"], message["findings"]
                done = done or message.get("done", False)
                patience = 3 * args.time_limit + 10  # past the imports: the per-input bound applies
            process.wait()
            reader.join()
            total += counted
            findings += worker_findings
            if done and process.returncode == 0:
                break
            # The worker died or hung: the input it was on (if it was loading one) is the finding.
            kind = "hang" if killed else f"died{process.returncode}"  # (-9 without `killed`: the OOM killer)
            if not current.exists():
                if counted == 0:
                    messages.append(f"{name}: the worker failed before fuzzing (exit status {process.returncode})")
                    print(messages[-1], flush=True)
                    findings += 1
                    break
                # Between inputs (making a mutant): the runner's problem, not the loader's.
                print(f"fuzz: {name}: the worker stopped between inputs ({kind}); starting another", flush=True)
                seed += 1_000_003
                continue
            data = current.read_bytes()
            path = save_finding(name, kind, data, f"the worker process ended with status {process.returncode}")
            messages.append(f"{name}: {kind}: the worker stopped on this input -> {path}")
            print(messages[-1], flush=True)
            findings += 1
            total += 1
            seed += 1_000_003  # a fresh worker continues with other inputs
    finally:
        if process is not None and process.poll() is None:  # interrupted (Ctrl-C, a time limit): leave no worker
            process.kill()
            process.wait()
        current.unlink(missing_ok=True)
    return total, findings, messages


def run(
    seconds: float = 120.0,
    *,
    targets: list[str] | None = None,
    seed: int = 0,
    max_inputs: int = 10**12,
    time_limit: float = 5.0,
    memory_limit: int = 1024,
    engine: str = "loop",
    quiet: bool = False,
) -> dict:
    """Fuzz ``targets`` (default: every one) for ``seconds`` in all; returns ``{name: (inputs, findings, messages)}``.

    A target whose module cannot be imported (its distribution is missing) is skipped,
    unless it was named.
    """
    args = argparse.Namespace(seed=seed, max_inputs=max_inputs, time_limit=time_limit, memory_limit=memory_limit)
    names = targets or target_names()
    available = []
    for name in names:
        try:
            import_target(name)
        except ImportError as exc:
            if targets:
                raise
            print(f"fuzz: skipping target {name!r}: {exc}", flush=True)
            continue
        available.append(name)
    results = {}
    start = time.time()
    for i, name in enumerate(available):
        share = (seconds - (time.time() - start)) / (len(available) - i)
        if engine == "atheris":
            results[name] = _run_atheris(name, share, args)
        else:
            results[name] = _run_target(name, share, args)
        if not quiet:
            inputs, found, _ = results[name]
            print(f"fuzz: {name}: {inputs} inputs, {found} failing", flush=True)
    return results


# --------------------------------------------------------------------------- atheris


def _run_atheris(name: str, seconds: float, args) -> tuple[int, int, list[str]]:
    """Fuzz ``name`` with atheris (libFuzzer, coverage-guided) in a subprocess."""
    corpus = CRASH_DIR / f".corpus-{name}"
    corpus.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--atheris-worker",
        name,
        "--seed",
        str(args.seed),
        "--current",
        str(corpus),
        f"-max_total_time={max(1, int(seconds))}",
        f"-timeout={max(1, int(args.time_limit))}",
        f"-rss_limit_mb={args.memory_limit + 1024}",
        f"-seed={args.seed + 1}",
        f"-artifact_prefix={CRASH_DIR}/{name}-atheris-",
        "-print_final_stats=1",
        *([f"-runs={args.max_inputs}"] if args.max_inputs < 10**12 else []),
        "-max_len=65536",
        str(corpus),
    ]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    try:  # libFuzzer stops itself after -max_total_time; this bounds a stuck one
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=seconds + 120)
    except subprocess.TimeoutExpired as exc:
        message = f"{name}: atheris did not stop within {seconds + 120:.0f} s (killed)"
        print(message, flush=True)
        return _count_units(exc.stdout, exc.stderr), 1, [message]
    output = result.stdout + result.stderr
    inputs = _count_units(output)
    messages = []
    if result.returncode != 0:
        tail = "\n".join(output.splitlines()[-30:])
        messages.append(f"{name}: atheris stopped with status {result.returncode}:\n{tail}")
        print(messages[-1], flush=True)
    return inputs, int(result.returncode != 0), messages


def _count_units(*outputs) -> int:
    """The number of inputs libFuzzer says it ran, from its final statistics."""
    for output in outputs:
        text = output.decode(errors="replace") if isinstance(output, bytes) else (output or "")
        for line in text.splitlines():
            if line.startswith("stat::number_of_executed_units:"):
                return int(line.split(":")[-1])
    return 0


def atheris_worker(args, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["ember"]):
        import ember  # noqa: F401
        import ember.serialization  # noqa: F401
    target = import_target(args.atheris_worker)
    import ember

    corpus = Path(args.current)
    for seed in target.seeds():
        (corpus / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)
    rng = random.Random(args.seed)
    pool = list(target.seeds())

    def test_one(data: bytes) -> None:
        try:
            target.load(data)
        except ember.SerializationError:
            pass

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        # It must never raise: atheris hangs (a futex wait) when a custom mutator does.
        rng.seed(seed)
        if rng.random() >= 0.3:
            try:
                return mutate(data or rng.choice(pool), rng, pool, target)[:max_size]
            except Exception:  # a mutant too big to build (MemoryError under the address-space limit), ...
                pass
        return atheris.Mutate(data, max_size)

    memory_limit = next((int(a.split("=")[1]) for a in libfuzzer_args if a.startswith("-rss_limit_mb=")), 2048)
    _limit_address_space(memory_limit)
    atheris.Setup([sys.argv[0], *libfuzzer_args], test_one, custom_mutator=custom_mutator)
    atheris.Fuzz()


# --------------------------------------------------------------------------- command line


def _reproduce(path: str) -> int:
    data = Path(path).read_bytes()
    name = Path(path).name.split("-", 1)[0]
    target = import_target(name if name in target_names() else "state_dict")
    import ember

    try:
        target.load(data)
    except ember.SerializationError as exc:
        print(f"raised SerializationError, as it should: {exc}")
        return 0
    print("loaded without error")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="total fuzzing time (default 120)")
    parser.add_argument("--max-inputs", type=int, default=10**12, help="stop a target after this many inputs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutation loop (deterministic)")
    parser.add_argument("--target", action="append", help="a target in fuzz/targets/ (repeatable; default all)")
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds one input may take (default 5)")
    parser.add_argument("--memory-limit", type=int, default=1024, help="MB the worker may grow by (default 1024)")
    parser.add_argument("--engine", choices=("loop", "atheris", "auto"), default="loop")
    parser.add_argument("--reproduce", metavar="FILE", help="load one saved input in this process")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--atheris-worker", help=argparse.SUPPRESS)
    parser.add_argument("--current", help=argparse.SUPPRESS)
    parser.add_argument("--deadline-monotonic-in", type=float, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.atheris_worker:
        atheris_worker(args, rest)
        return 0
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.reproduce:
        return _reproduce(args.reproduce)
    if args.worker:
        args.deadline = time.monotonic() + args.deadline_monotonic_in
        return worker(args)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if importlib.util.find_spec("atheris") is not None else "loop"
    print(f"fuzz: engine {engine}, {args.seconds:g} s, seed {args.seed}", flush=True)
    results = run(
        args.seconds,
        targets=args.target,
        seed=args.seed,
        max_inputs=args.max_inputs,
        time_limit=args.time_limit,
        memory_limit=args.memory_limit,
        engine=engine,
    )
    inputs = sum(r[0] for r in results.values())
    failing = sum(r[1] for r in results.values())
    print(f"fuzz: {inputs} inputs in all, {failing} failing")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
