#!/usr/bin/env bash
# Regenerate the result documents the report tests read, with the real CLI (a release build
# keeps it under a minute). The golden chart data under ../golden then changes with them:
#   NUMALAB_UPDATE_GOLDEN=1 cargo test -p numalab-report --test golden
# Small on purpose: 4 runs of about one simulated second per policy, 3 runs per study cell.
set -euo pipefail
cd "$(dirname "$0")"
numalab=${NUMALAB:-../../../../target/release/numalab}
"$numalab" compare --machine server-a-4n --workload master-slave --scale 0.02 --iterations 600 --runs 4 \
  --policies linux,autonuma,round-4k --set sim.engine=fast --format json --out compare.json
rm -rf study.cache
"$numalab" study study.toml --cache study.cache --format json --out study.json
rm -rf study.cache
"$numalab" model roofline --machine knl-7250-flat --ai 0.1,1,10,100 --format json --out roofline.json
"$numalab" model mva --policy static,ideal --sweep tau=1:4:1 --format json --out mva.json
# The profile is of this host (its kernel, CPU and counters); any short command will do.
"$numalab" profile --interval 100 --format json --out profile.json -- sleep 0.5
# Timelines (runs[].timeline at sim.metrics_interval_ms): Carrefour against its base, 20 ms points.
"$numalab" compare --machine server-a-4n --workload master-slave --scale 0.02 --threads 16 --runs 2 \
  --policies first-touch,first-touch+carrefour --set sim.metrics_interval_ms=20 --set sim.tick_ms=10 \
  --set policy.first-touch+carrefour.interval_ms=10 --format json --out timeline.json
# Tiering (knl-7250-flat, DDR4 + MCDRAM) with a 16-program mix, 200 ms points: pages per node and
# tier over time, and the roofline with per-application points (runs[].timeline[].apps).
# Settings as studies/hydm-knl-short.toml.
"$numalab" compare --machine knl-7250-flat --workload hydm-npb-mix --scale 0.002 --runs 1 \
  --policies tier-static,hydm --set sim.tick_ms=100 --set 'machine.nodes[1].mem_bytes=34357248' \
  --set sim.metrics_interval_ms=200 --format json --out tiering.json
# profile-imc.json is hand-made, not measured (no host here has an uncore IMC PMU): it is
# written by ../profile_imc_fixture.rs as numalab's own profile type,
#   NUMALAB_UPDATE_GOLDEN=1 cargo test -p numalab-report --test profile_imc_fixture
