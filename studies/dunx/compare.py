#!/usr/bin/env python3
"""Put each simulated point of the DUnX scenario-2 studies beside the local/remote model.

Usage (from the repository root, after running the two studies, docs/results/dunx.md):

    python3 studies/dunx/compare.py dunx-gp1000.json dunx-gp1000-sweep.json > tables.md

Environment: NUMALAB = the numalab executable (default `numalab`).

For every study cell (one simulated run; the runs of a cell are identical, the script checks)
it calls `numalab model mva` twice on the same instance (`--classes` = the cell's workload file):

- the model's own policy for the cell: first-touch -> static, cache -> cache, mor -> mor;
  dunx -> ideal (the model has no DUnX rule; ideal is what DUnX aims at), except the design's
  limiting cases freeze_window = 0 (-> cache) and freeze_window = 0 with recent_mod = 0
  (-> mor);
- policy `measured`: the mix counted in the simulation (p_l = the local access ratio,
  q_m = (migration faults + coherency faults with a copy) / references, q_r = replication
  faults / references, q_c = coherency faults / references), so that the model only times it.

Both get tau = the workload's compute gap (`gap.us` of its runs phase: 2 us for the synth
instances, 20 us for mandel-like) and the first-touch faults as other faults
(q_o = first-touch faults / references, c_o = the machine's first-touch fault cost).
A cell's workload may be a file or a built-in preset (the DUnX application presets
`msort-like` ... `mandel-like`); a preset is written out with `numalab workload show` first.
Standard library only (Python 3.11+ for tomllib); prints Markdown tables.
"""
import json
import os
import subprocess
import sys
import tempfile
import tomllib

NUMALAB = os.environ.get("NUMALAB", "numalab")


_FILES = {}


def workload_file(workload):
    """A TOML file for the cell's workload: the file itself, or a preset written out."""
    if os.path.isfile(workload):
        return workload
    if workload not in _FILES:
        text = subprocess.run([NUMALAB, "workload", "show", workload, "--format", "table"], check=True,
                              capture_output=True, text=True).stdout
        f = tempfile.NamedTemporaryFile("w", suffix=".toml", prefix=workload + "-", delete=False)
        f.write(text)
        f.close()
        _FILES[workload] = f.name
    return _FILES[workload]


def tau_us(path):
    """The compute gap of the workload's runs phase, in us (the model's tau)."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    gaps = {ph["gap"]["us"] for ph in doc["phase"] if "gap" in ph}
    if len(gaps) != 1:
        raise SystemExit(f"{path}: need exactly one compute gap, found {sorted(gaps)}")
    return gaps.pop()


def model(workload, policy, extra):
    path = workload_file(workload)
    cmd = [NUMALAB, "model", "mva", "--machine", "gp1000", "--classes", path, "--policy", policy,
           "--tau", repr(tau_us(path)), "--format", "json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["points"][0]


def model_policy(policy, grid):
    if policy == "first-touch":
        return "static"
    if policy in ("cache", "mor"):
        return policy
    fw = grid.get("policy.dunx.freeze_window_ms", 1000.0)
    rm = grid.get("policy.dunx.recent_mod", 31.0)
    if fw == 0:
        return "mor" if rm == 0 else "cache"
    return "ideal"


def fmt(v, d=4):
    return f"{v:.{d}f}"


def rows(doc):
    out = []
    for cell in doc["cells"]:
        runs = cell["runs"]
        times = {r["exec_time_s"] for r in runs}
        if len(times) != 1:
            print(f"note: {cell['workload']} {cell['policy']} {cell['grid']}: runs differ: {sorted(times)}",
                  file=sys.stderr)
        r = runs[0]
        pc = r.get("policy_counters") or {}
        refs = r["accesses"]
        mig = pc.get("faults_migration", 0) + pc.get("faults_coherency_with_copy", 0)
        rep = pc.get("faults_replication", 0)
        coh = pc.get("faults_coherency", 0)
        ft_us = cell["config"]["machine"]["os_costs"]["first_touch_fault_ns"] / 1000.0
        other = ["--q-o", repr(r["first_touch_faults"] / refs), "--c-o", repr(ft_us)]
        wl = cell["workload"]
        mp = model_policy(cell["policy"], cell["grid"])
        own = model(wl, mp, other)
        meas = model(wl, "measured", other + [
            "--p-l", repr(r["local_access_ratio"]), "--q-m", repr(mig / refs),
            "--q-r", repr(rep / refs), "--q-c", repr(coh / refs)])
        sim_s = sum(x["exec_time_s"] for x in runs) / len(runs)
        out.append(dict(
            inst=os.path.basename(wl).removesuffix(".toml"), policy=cell["policy"], grid=cell["grid"],
            sim_s=sim_s, p_l=r["local_access_ratio"], mig=mig, rep=rep, coh=coh,
            freezes=pc.get("freezes", 0), defrosts=pc.get("defrosts", 0), maxmig=pc.get("max_migrations_per_page", 0),
            mp=mp, own_s=own["predicted_s"], own_pl=own["p_l"], meas_s=meas["predicted_s"], runs=len(runs),
            refs_per_proc=own["refs"], own=own))
    return out


def show(v):
    # The study document writes an infinite grid value as null.
    return "inf" if v is None else f"{v:g}"


def err(model_s, sim_s):
    return f"{(model_s - sim_s) / sim_s * 100:+.1f}%"


def table(rs, swept):
    head = ["instance"] + (["freeze_ms", "recent_mod"] if swept else ["policy"]) + [
        "sim s", "p_l sim", "migr", "repl", "coh", "freezes", "max migr/page",
        "model policy", "p_l model", "model s", "model err", "measured-mix s", "measured err"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rs:
        key = [r["inst"]]
        if swept:
            key += [show(r["grid"]["policy.dunx.freeze_window_ms"]), show(r["grid"]["policy.dunx.recent_mod"])]
        else:
            key += [r["policy"]]
        cells = key + [fmt(r["sim_s"]), fmt(r["p_l"], 3), str(r["mig"]), str(r["rep"]), str(r["coh"]),
                       str(r["freezes"]), str(r["maxmig"]), r["mp"], fmt(r["own_pl"], 3), fmt(r["own_s"]),
                       err(r["own_s"], r["sim_s"]), fmt(r["meas_s"]), err(r["meas_s"], r["sim_s"])]
        print("| " + " | ".join(cells) + " |")
    print()


def main():
    for path in sys.argv[1:]:
        doc = json.load(open(path))
        rs = rows(doc)
        swept = any(r["grid"] for r in rs)
        print(f"### {doc['study']['study']['name']}\n")
        table(rs, swept)


if __name__ == "__main__":
    main()
