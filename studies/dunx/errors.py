#!/usr/bin/env python3
"""Put the simulated `error` policy beside the local/remote model's `error` policy.

Usage (from the repository root, after running studies/dunx-gp1000-errors.toml; docs/results/dunx.md,
"The model's error cases"):

    NUMALAB=numalab python3 studies/dunx/errors.py dunx-gp1000-errors.json > errors.md

For every cell (an instance and a point of the e_SS x e_SP grid; only the classes the instance
has are kept, so the grid's other key gives duplicate cells, which are dropped) it prints:

- the simulated time: the mean of the cell's runs, and their range (the wrong pages are drawn
  from each run's seed, so runs differ);
- the realized fractions: `error` treats exactly round(e_c * P_c) pages of class c wrongly
  (policy counters wrong_pages_* / pages_*), which differs from e_c when e_c * P_c is not whole;
- `numalab model mva --policy error` at the nominal fractions, and at the realized ones (the
  model's counts are linear in e_c, docs/model.md §3.3) with its error against the mean
  simulated time;
- the threads' mean busy time (time issuing references and computing, not waiting at
  barriers: `thread_busy_s.mean`, mean over the runs), the per-process time the model
  describes;
- `--policy measured` with the mix counted in the simulation (mean over the runs), which times
  what the simulated policy did, and its error.

Both model calls get tau = 2 us (the instances' compute gap) and the first-touch faults as other
faults, as studies/dunx/compare.py does. Standard library only (Python 3.11+).
"""
import json
import os
import subprocess
import sys

NUMALAB = os.environ.get("NUMALAB", "numalab")
CLASSES = ("ro", "rm", "ss", "sp")


def model(path, extra):
    cmd = [NUMALAB, "model", "mva", "--machine", "gp1000", "--classes", path, "--tau", "2",
           "--format", "json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["points"][0]["predicted_s"]


def mean(xs):
    return sum(xs) / len(xs)


def err(model_s, sim_s):
    return f"{(model_s - sim_s) / sim_s * 100:+.1f}%"


def main():
    print("| instance | e_SS | e_SP | realized e_SS | realized e_SP | runs | sim s (mean) | sim s (min-max) | busy s (mean) "
          "| p_l sim | migr | repl | model s (nominal e) | model s (realized e) | model err | measured-mix s | measured err |")
    print("|" + "---|" * 17)
    for path in sys.argv[1:]:
        doc = json.load(open(path))
        seen = set()
        for cell in doc["cells"]:
            runs = cell["runs"]
            pc = runs[0].get("policy_counters") or {}
            realized = {}
            for c in CLASSES:
                pages = pc.get(f"pages_{c}", 0)
                realized[c] = pc.get(f"wrong_pages_{c}", 0) / pages if pages else None
            wl = cell["workload"]
            key = (wl, tuple(realized[c] for c in CLASSES))
            if key in seen:
                continue
            seen.add(key)
            for r in runs:
                rc = r.get("policy_counters") or {}
                assert all(rc.get(f"wrong_pages_{c}") == pc.get(f"wrong_pages_{c}") for c in CLASSES)
            refs = mean([r["accesses"] for r in runs])
            mig = mean([(r["policy_counters"].get("faults_migration", 0) + r["policy_counters"].get("faults_coherency_with_copy", 0))
                        for r in runs])
            rep = mean([r["policy_counters"].get("faults_replication", 0) for r in runs])
            coh = mean([r["policy_counters"].get("faults_coherency", 0) for r in runs])
            p_l = mean([r["local_access_ratio"] for r in runs])
            ft_us = cell["config"]["machine"]["os_costs"]["first_touch_fault_ns"] / 1000.0
            other = ["--q-o", repr(mean([r["first_touch_faults"] for r in runs]) / refs), "--c-o", repr(ft_us)]
            g = cell["grid"]
            es, es_nominal = [], []
            for c in CLASSES:
                if realized[c] is not None:
                    es += [f"--e-{c}", repr(realized[c])]
                    es_nominal += [f"--e-{c}", repr(g.get(f"policy.error.errors.{c}", 0.0))]
            own = model(wl, ["--policy", "error"] + es + other)
            own_nominal = model(wl, ["--policy", "error"] + es_nominal + other)
            busy = mean([r["thread_busy_s"]["mean"] for r in runs])
            meas = model(wl, ["--policy", "measured", "--p-l", repr(p_l), "--q-m", repr(mig / refs),
                              "--q-r", repr(rep / refs), "--q-c", repr(coh / refs)] + other)
            times = [r["exec_time_s"] for r in runs]
            sim_s = mean(times)

            def nominal(c):
                return f"{g.get(f'policy.error.errors.{c}', 0.0):g}" if realized[c] is not None else "—"

            def real(c):
                return f"{realized[c]:.3f}" if realized[c] is not None else "—"

            inst = os.path.basename(wl).removesuffix(".toml")
            print(f"| {inst} | {nominal('ss')} | {nominal('sp')} | {real('ss')} | {real('sp')} | {len(runs)} | {sim_s:.4f} | "
                  f"{min(times):.4f}-{max(times):.4f} | {busy:.4f} | {p_l:.3f} | {mig:g} | {rep:g} | {own_nominal:.4f} | {own:.4f} | "
                  f"{err(own, sim_s)} | "
                  f"{meas:.4f} | {err(meas, sim_s)} |")


if __name__ == "__main__":
    main()
