"""Where the host time of one compiled inference call goes: the guard check, the CUDA graph
runner (reduce-overhead) or the compiled graph, and the rest (the runner code, aotautograd's
wrapper, autocast), beside torch.compile's whole call. Each guard implementation in one run:
the C++ tensor test that reads the tensor's fields (``_tensor_checks``, where it is built), the
C tests that call torch's getters (``_guard_checks``), and the Python expressions they replace;
and, with field reads, the CUDA graph replay's address check with and without its C++ read
(``danlu_inductor._replay_checks``).

    python benchmarks/probes/host_call_split.py --models resnet50,convnext_tiny --out F.json

Host time of a call: calls issued back to back with no wait (few enough that the launches fit
in the device's queue); the synced time: synchronize, call, synchronize (the suite's timing).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from dynamo_guard_cost import record_checks  # noqa: E402
from gpu_models_zoo import MODELS  # noqa: E402


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def host_and_synced(call, device, host_calls=5, synced_calls=20):
    for _ in range(3):
        call()
    _sync(device)
    hosts = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(host_calls):
            call()
        hosts.append((time.perf_counter() - t) / host_calls * 1e6)
        _sync(device)
    synced = []
    for _ in range(synced_calls):
        _sync(device)
        t = time.perf_counter()
        call()
        _sync(device)
        synced.append((time.perf_counter() - t) * 1e6)
    return min(hosts), statistics.median(synced)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50")
    p.add_argument("--mode", default="reduce-overhead")
    p.add_argument("--device", default="cuda")
    p.add_argument("--small", action="store_true", help="the small models (a CPU smoke run)")
    p.add_argument("--out", default=None)
    args = p.parse_args()

    import danlu
    from danlu_dynamo.capture import guard_codegen
    from danlu_inductor import cudagraphs

    device = torch.device(args.device)
    checks = record_checks()
    runner_us = []
    runner_call = cudagraphs.CudaGraphRunner.__call__

    def timed_runner(self, *a):
        t = time.perf_counter()
        out = runner_call(self, *a)
        runner_us.append((time.perf_counter() - t) * 1e6)
        return out

    cudagraphs.CudaGraphRunner.__call__ = timed_runner
    c_tests, field_tests = guard_codegen._c_checks, guard_codegen._direct_checks
    replay_check = cudagraphs._same_addresses
    results = {}
    amp = (
        (lambda: torch.autocast("cuda", dtype=torch.bfloat16))
        if device.type == "cuda"
        else (lambda: torch.autocast("cpu", enabled=False))
    )
    for name in args.models.split(","):
        module, make_inputs, _ = MODELS[name].build(args.small)
        module = module.to(device).eval()
        inputs = tuple(x.to(device) for x in make_inputs(torch.Generator().manual_seed(0)))
        arg_names = [n for n in inspect.signature(type(module).forward).parameters if n != "self"]
        frame_locals = {"self": module, **dict(zip(arg_names, inputs))}
        row = {}
        # (name, C tests, C++ field reads, C++ replay-address check)
        variants = [
            ("C getter tests", c_tests, None, replay_check),
            ("Python guard tests", None, None, replay_check),
        ]
        if field_tests is not None:
            variants.insert(0, ("C++ field reads", c_tests, field_tests, replay_check))
            if replay_check is not None:  # the replay check's own A/B
                variants.insert(
                    1, ("C++ field reads, data_ptr() replay check", c_tests, field_tests, None)
                )
        for variant, impl, fields, replay in variants:
            guard_codegen._c_checks, guard_codegen._direct_checks = impl, fields
            cudagraphs._same_addresses = replay
            guard_codegen._c_tensor_types.clear()
            danlu.reset()
            checks.clear()
            fn = danlu.compile(module, mode=args.mode if device.type == "cuda" else None)

            def call(fn=fn, inputs=inputs):
                with torch.no_grad(), amp():
                    fn(*inputs)

            call()
            _sync(device)
            runner_us.clear()
            host, synced = host_and_synced(call, device)
            n_runner = len(runner_us)
            check = checks[0]
            with torch.no_grad(), amp():
                assert check(frame_locals), check.failure_reason(frame_locals)
                t = time.perf_counter()
                for _ in range(200):
                    check(frame_locals)
                guard = (time.perf_counter() - t) / 200 * 1e6
            runner = statistics.median(runner_us) if n_runner else None
            row[variant] = {
                "host_us": round(host, 1),
                "synced_us": round(synced, 1),
                "guard_us": round(guard, 1),
                "guards": len(check.guards.splitlines()),
                "cuda_graph_runner_us": round(runner, 1) if runner else None,
            }
            print(name, variant, row[variant], flush=True)
        guard_codegen._c_checks, guard_codegen._direct_checks = c_tests, field_tests
        cudagraphs._same_addresses = replay_check
        if device.type == "cuda":
            torch._dynamo.reset()
            tfn = torch.compile(module, mode=args.mode)

            def tcall(tfn=tfn, inputs=inputs):
                with torch.no_grad(), amp():
                    tfn(*inputs)

            tcall()
            host, synced = host_and_synced(tcall, device)
            row["torch.compile"] = {"host_us": round(host, 1), "synced_us": round(synced, 1)}
            print(name, "torch.compile", row["torch.compile"], flush=True)
        results[name] = row
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
