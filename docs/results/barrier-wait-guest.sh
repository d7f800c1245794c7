# Guest payload of docs/results/barrier-wait-guest.md: what a real kernel does with OpenMP barrier
# waiters that spin or sleep, with and without background noise. Run from the repository root:
#
#   gcc -O2 -fopenmp -o /tmp/barrier_walk guest/src/barrier_walk.c -lm
#   GUEST_TIMEOUT_S=900 guest/numalab-guest.sh run 2 docs/results/barrier-wait-guest.sh OUT /tmp/barrier_walk
#   KERNEL=$(guest/numalab-guest.sh damon-kernel) GUEST_TIMEOUT_S=900 guest/numalab-guest.sh run 2 \
#       docs/results/barrier-wait-guest.sh OUT /tmp/barrier_walk
#   GUEST_TIMEOUT_S=900 guest/numalab-guest.sh run 2x4 docs/results/barrier-wait-guest.sh OUT /tmp/barrier_walk
#
# barrier_walk always runs 4 threads: on the `2` guest (2 nodes of 2 CPUs, docs/guest.md) one
# per CPU; on the `2x4` guest (2 nodes of 4 CPUs) half the CPUs have none, as on a server with
# SMT on and one thread per core. NUMA balancing is switched off: this is the `linux` policy,
# first touch and the scheduler alone. One line per run in OUT/payload.out.
echo 0 > /proc/sys/kernel/numa_balancing
echo "kernel $(uname -r), CPUs of node 0: $(cat /sys/devices/system/node/node0/cpulist), of node 1: $(cat /sys/devices/system/node/node1/cpulist)"
for noise in 0 50; do
    for wait in default GOMP_SPINCOUNT=2000 OMP_WAIT_POLICY=passive; do
        for seed in 1 2 3 4; do
            np=
            if [ "$noise" != 0 ]; then
                barrier_walk --noise "$noise" 200 900 --seed "$seed" &
                np=$!
            fi
            case "$wait" in default) set -- ;; *) set -- "$wait" ;; esac
            line="$(env OMP_NUM_THREADS=4 "$@" barrier_walk --iterations 2000 --mib 2 --seed "$seed" | tr '\n' ' ')"
            echo "noise_hz=$noise wait=$wait seed=$seed $line"
            if [ -n "$np" ]; then kill "$np"; wait "$np" 2>/dev/null; fi
        done
    done
done
true
