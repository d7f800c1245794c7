# Guest payload of docs/results/barrier-wait-guest.md, "Idle CPUs": barrier_walk with 4 threads
# on the 2-node guest of 4 CPUs per node (guest/numalab-guest.sh NODES = 2x4), so that half the
# CPUs have no thread, as on a server with SMT on and one thread per core. From the repository
# root:
#
#   gcc -O2 -fopenmp -o /tmp/barrier_walk guest/src/barrier_walk.c -lm
#   GUEST_TIMEOUT_S=900 guest/numalab-guest.sh run 2x4 docs/results/barrier-wait-guest-idle.sh OUT /tmp/barrier_walk
echo 0 > /proc/sys/kernel/numa_balancing
echo "kernel $(uname -r) cpus $(nproc) cpu0 siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list) node0 $(cat /sys/devices/system/node/node0/cpulist) node1 $(cat /sys/devices/system/node/node1/cpulist)"
for noise in 0 50; do
    for wait in default OMP_WAIT_POLICY=passive; do
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
