#!/usr/bin/env bash
# qemu harness for numalab's live-observation code: boots small NUMA guests (no KVM needed)
# from an initramfs made of busybox, numa_touch and optionally the numalab binary.
#
#   guest/numalab-guest.sh capture NODES OUTDIR     NODES = 1, 2, 2x4 or 4; dump sysfs/procfs text
#   guest/numalab-guest.sh profile NUMALAB_BIN      2-node guest: profile numa_touch, print JSON
#   guest/numalab-guest.sh run NODES PAYLOAD OUTDIR [FILE...]
#                                                   NODES = 1, 2, 2x4 (2 nodes of 4 CPUs)
#                                                   or 4;
#                                                   run your own shell script in the guest,
#                                                   with FILEs (programs, data) in /bin
#   guest/numalab-guest.sh damon-kernel              print the path of a kernel image with DAMON
#                                                   (Debian's Linux 6.12, fetched and unpacked
#                                                   into KERNEL_CACHE once; /boot is not touched)
#
# Environment: QEMU (qemu-system-x86_64), KERNEL (newest /boot/vmlinuz-*), BUILD_DIR
# (~/.cache/numalab-guest), NUMALAB (a numalab binary to put in the guest, for `run`),
# GUEST_TIMEOUT_S (120), KERNEL_CACHE (~/.cache/numalab-guest/kernels), DAMON_KERNEL_PACKAGE
# (linux-image-6.12-amd64). See docs/guest.md.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Outside the source tree, so a read-only checkout works.
BUILD_DIR="${BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/numalab-guest}"
QEMU="${QEMU:-qemu-system-x86_64}"
KERNEL="${KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)}"
GUEST_TIMEOUT_S="${GUEST_TIMEOUT_S:-120}"

die() { echo "numalab-guest: $*" >&2; exit 2; }

# damon_kernel: the path of a kernel image built with DAMON (CONFIG_DAMON_SYSFS and
# CONFIG_DAMON_VADDR), for the DAMON guest test. Debian bookworm's default kernel (6.1) is built
# without DAMON; its Linux 6.12 (the metapackage linux-image-6.12-amd64, from
# bookworm-security) has it. The image package the metapackage names is downloaded with
# `apt-get download` and unpacked with `dpkg-deb -x` under KERNEL_CACHE, not installed: an
# installed 6.12 would become the newest /boot/vmlinuz-* and so every other guest test's kernel.
# The guest needs no module (the initramfs has none): DAMON, NUMA, serial and initramfs support
# are built in.
damon_kernel() {
    local cache="${KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numalab-guest/kernels}"
    local meta="${DAMON_KERNEL_PACKAGE:-linux-image-6.12-amd64}" pkg
    image_of() { { apt-cache depends "$meta" 2>/dev/null || true; } | sed -n 's/^  Depends: \(linux-image-[^ <>]*\)$/\1/p' | head -n 1; }
    pkg="$(image_of)"
    if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
        apt-get update -qq >&2 || true
        pkg="$(image_of)"
    fi
    [ -n "$pkg" ] || die "apt does not know $meta (Debian bookworm's Linux 6.12, in bookworm-security; run apt-get update)"
    local dir="$cache/$pkg"
    if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
        mkdir -p "$cache"
        local tmp
        tmp="$(mktemp -d "$cache/fetch.XXXXXX")"
        # Stale package lists name an image the archive may have dropped: update once, retry.
        if ! (cd "$tmp" && apt-get download "$pkg" >&2) && [ "$(id -u)" = 0 ] && apt-get update -qq >&2; then
            pkg="$(image_of)"
            dir="$cache/$pkg"
            (cd "$tmp" && apt-get download "$pkg" >&2) || true
        fi
        ls "$tmp"/*.deb >/dev/null 2>&1 || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
        dpkg-deb -x "$tmp"/*.deb "$tmp/x" || { rm -rf "$tmp"; die "dpkg-deb -x failed on $pkg"; }
        rm -rf "$dir"
        mv "$tmp/x" "$dir"
        rm -rf "$tmp"
    fi
    local img cfg
    img="$(ls -1 "$dir"/boot/vmlinuz-* | head -n 1)"
    cfg="$dir/boot/config-${img##*/vmlinuz-}"
    grep -q '^CONFIG_DAMON_SYSFS=y' "$cfg" && grep -q '^CONFIG_DAMON_VADDR=y' "$cfg" \
        || die "$img: its config $cfg lacks CONFIG_DAMON_SYSFS=y or CONFIG_DAMON_VADDR=y"
    echo "$img"
}

need_tools() {
    command -v "$QEMU" >/dev/null || die "$QEMU not found (apt-get install qemu-system-x86)"
    [ -n "$KERNEL" ] && [ -r "$KERNEL" ] || die "no readable kernel image (set KERNEL=, or apt-get install linux-image-amd64)"
    BUSYBOX="${BUSYBOX:-$(command -v busybox || true)}"
    [ -n "$BUSYBOX" ] || die "busybox not found (apt-get install busybox-static)"
    file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' || die "$BUSYBOX is not static (apt-get install busybox-static)"
    command -v cpio >/dev/null || die "cpio not found"
    command -v rustc >/dev/null || die "rustc not found"
}

# numa_touch is std-only Rust, built without cargo so this script never contends for the
# workspace's cargo lock (the integration test runs it from inside `cargo test`).
build_touch() {
    mkdir -p "$BUILD_DIR"
    local out="$BUILD_DIR/numa_touch"
    if [ ! -x "$out" ] || [ "$HERE/src/numa_touch.rs" -nt "$out" ]; then
        rustc --edition 2021 -O -C target-feature=+crt-static "$HERE/src/numa_touch.rs" -o "$out"
    fi
    echo "$out"
}

# Copy an executable and, when dynamically linked, the shared libraries ldd names.
install_bin() {
    local bin="$1" root="$2" name="$3"
    install -D -m 0755 "$bin" "$root/bin/$name"
    if ldd "$bin" >/dev/null 2>&1; then
        ldd "$bin" | grep -o '/[^ ]*' | while read -r lib; do
            [ -e "$lib" ] && install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
        done
    fi
}

# make_initrd NAME PAYLOAD_FILE [NUMALAB_BIN [EXTRA_FILE...]] -> path of the gzip'd cpio archive
make_initrd() {
    local name="$1" payload="$2" numalab="${3:-}"
    shift 3 2>/dev/null || shift $#
    local root="$BUILD_DIR/$name/root"
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,mnt/huge}
    install -m 0755 "$BUSYBOX" "$root/bin/busybox"
    install_bin "$(build_touch)" "$root" numa_touch
    [ -n "$numalab" ] && install_bin "$numalab" "$root" numalab
    local f
    for f in "$@"; do
        [ -f "$f" ] || die "$f: no such file to put in the guest"
        install_bin "$f" "$root" "$(basename "$f")"
    done
    install -m 0755 "$payload" "$root/payload.sh"
    cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# ttyS1 is the data channel (a file on the host): clean of kernel console messages.
exec 3>/dev/ttyS1
echo "@@@BEGIN" >&3
sh /payload.sh >&3 2>&1
echo "@@@RC $?" >&3
echo "@@@DONE" >&3
sync
# poweroff -f stops the machine at once: give the serial line time to drain what is still in
# the UART and the tty buffer (a run once lost its last lines, @@@DONE among them).
sleep 1
poweroff -f
EOF
    chmod 0755 "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$BUILD_DIR/$name/initrd.gz"
    echo "$BUILD_DIR/$name/initrd.gz"
}

# boot NODES INITRD DATA_OUT: run the guest to completion, its data channel into DATA_OUT.
boot() {
    local nodes="$1" initrd="$2" data="$3"
    local topo
    case "$nodes" in
        1) topo=(-smp 2 -m 1G) ;;
        2) topo=(-smp 4 -m 2G
                 -object memory-backend-ram,id=m0,size=1G -object memory-backend-ram,id=m1,size=1G
                 -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1
                 -numa dist,src=0,dst=1,val=21) ;;
        # Two nodes of 4 CPUs, for programs with fewer threads than CPUs.
        2x4) topo=(-smp 8 -m 2G
                 -object memory-backend-ram,id=m0,size=1G -object memory-backend-ram,id=m1,size=1G
                 -numa node,nodeid=0,cpus=0-3,memdev=m0 -numa node,nodeid=1,cpus=4-7,memdev=m1
                 -numa dist,src=0,dst=1,val=21) ;;
        # Three CPU nodes and one CPU-less memory node (3), with distinct distance classes.
        4) topo=(-smp 4 -m 2G
                 -object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M
                 -object memory-backend-ram,id=m2,size=512M -object memory-backend-ram,id=m3,size=512M
                 -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2,memdev=m1
                 -numa node,nodeid=2,cpus=3,memdev=m2 -numa node,nodeid=3,memdev=m3
                 -numa dist,src=0,dst=1,val=12 -numa dist,src=0,dst=2,val=20 -numa dist,src=0,dst=3,val=17
                 -numa dist,src=1,dst=2,val=20 -numa dist,src=1,dst=3,val=28 -numa dist,src=2,dst=3,val=28) ;;
        *) die "NODES must be 1, 2, 2x4 or 4, not $nodes" ;;
    esac
    local attempt
    for attempt in 1 2; do
        rm -f "$data"
        timeout "$GUEST_TIMEOUT_S" "$QEMU" -machine q35 -cpu max "${topo[@]}" \
            -kernel "$KERNEL" -initrd "$initrd" \
            -append "console=ttyS0 quiet loglevel=1 panic=-1" \
            -display none -monitor none -serial "file:$data.console" -serial "file:$data" \
            -no-reboot >"$data.qemu" 2>&1 \
            || die "qemu failed or timed out after ${GUEST_TIMEOUT_S}s; see $data.qemu and $data.console"
        tr -d '\r' <"$data" >"$data.tmp" && mv "$data.tmp" "$data"
        grep -q '^@@@DONE' "$data" && return 0
        # A kernel that panicked before the guest's init began (no @@@BEGIN) failed under
        # the emulator, not in the payload: Debian's 6.12 once took an int3 oops in the timer
        # softirq 1.3 s into boot under TCG. It boots once more; a second failure, or any
        # failure after @@@BEGIN, is reported (docs/guest.md, "A kernel that panics while
        # booting").
        if [ "$attempt" = 1 ] && ! grep -q '^@@@BEGIN' "$data" && grep -q 'Kernel panic' "$data.console"; then
            mv "$data.console" "$data.console.first"
            echo "numalab-guest: the guest kernel panicked while booting, before the payload (console log: $data.console.first); booting it once more" >&2
            continue
        fi
        die "guest did not finish; console log: $data.console"
    done
}

capture_payload() {
    cat <<'EOF'
dump() { for f in "$@"; do [ -f "$f" ] || continue; echo "@@@FILE $f"; cat "$f"; echo "@@@END"; done; }
S=/sys/devices/system/node
echo 16 > /proc/sys/vm/nr_hugepages
if [ -d $S/node1 ]; then
    numa_touch --touch 0:8 --touch 1:4 --hugetlb 1:2 --bind 1:2 --prefer 0:1 --interleave 3:4 \
        --file /bin/busybox --busy --hold-ms 4000 > /tmp/touch.out &
    pid=$!
    sleep 3
    echo "$pid" > /tmp/target_pid
    echo "@@@FILE /target_pid"; cat /tmp/target_pid; echo "@@@END"
    dump /proc/$pid/numa_maps /proc/$pid/sched /proc/$pid/status
    for t in /proc/$pid/task/*; do dump $t/sched; done
    wait $pid
    echo "@@@FILE /touch.out"; cat /tmp/touch.out; echo "@@@END"
fi
dump $S/online $S/possible $S/has_cpu $S/has_memory $S/has_normal_memory $S/has_generic_initiator
for d in $S/node*; do dump $d/cpulist $d/distance $d/meminfo $d/numastat; done
for d in /sys/devices/virtual/memory_tiering/memory_tier*; do dump $d/nodelist; done
for c in /sys/devices/system/cpu/cpu[0-9]*; do
    dump $c/topology/physical_package_id $c/topology/core_id $c/topology/thread_siblings_list
    dump $c/cache/index3/size $c/cpufreq/cpuinfo_max_freq
done
dump /sys/devices/system/cpu/online
dump /proc/vmstat /proc/sys/kernel/numa_balancing /proc/sys/vm/numa_stat /proc/cpuinfo
dump /sys/hypervisor/type /proc/sys/kernel/perf_event_paranoid
EOF
}

# Split the data channel into files: "@@@FILE /a/b" ... "@@@END" becomes OUTDIR/a/b.
extract() {
    local data="$1" out="$2"
    mkdir -p "$out"
    awk -v out="$out" '
        /^@@@FILE / { path = out $2; dir = path; sub(/\/[^\/]*$/, "", dir); system("mkdir -p \"" dir "\""); printf "" > path; inside = 1; next }
        /^@@@END$/ { if (inside) close(path); inside = 0; next }
        inside { print >> path }
    ' "$data"
}

cmd="${1:-}"
case "$cmd" in
    capture)
        [ $# -eq 3 ] || die "usage: $0 capture NODES OUTDIR"
        need_tools
        mkdir -p "$BUILD_DIR/capture-$2"
        capture_payload >"$BUILD_DIR/capture-$2/payload.sh"
        initrd="$(make_initrd "capture-$2" "$BUILD_DIR/capture-$2/payload.sh")"
        boot "$2" "$initrd" "$BUILD_DIR/capture-$2/data.txt"
        extract "$BUILD_DIR/capture-$2/data.txt" "$3"
        echo "captured $2-node guest into $3"
        ;;
    profile)
        [ $# -ge 2 ] || die "usage: $0 profile NUMALAB_BIN [NUMA_TOUCH_ARGS...]"
        need_tools
        numalab="$2"; shift 2
        touch_args="${*:---touch 0:48 --touch 1:24 --busy --hold-ms 1500}"
        mkdir -p "$BUILD_DIR/profile"
        cat >"$BUILD_DIR/profile/payload.sh" <<EOF
numalab --format json --out /tmp/profile.json profile --interval 100 -- numa_touch $touch_args > /tmp/touch.out 2>&1
rc=\$?
echo "@@@FILE /touch.out"; cat /tmp/touch.out; echo "@@@END"
echo "@@@FILE /profile.json"; cat /tmp/profile.json; echo "@@@END"
exit \$rc
EOF
        initrd="$(make_initrd profile "$BUILD_DIR/profile/payload.sh" "$numalab")"
        boot 2 "$initrd" "$BUILD_DIR/profile/data.txt"
        rm -rf "$BUILD_DIR/profile/out"
        extract "$BUILD_DIR/profile/data.txt" "$BUILD_DIR/profile/out"
        grep '^@@@RC' "$BUILD_DIR/profile/data.txt"
        echo "profile: $BUILD_DIR/profile/out/profile.json"
        ;;
    run)
        [ $# -ge 4 ] || die "usage: $0 run NODES PAYLOAD OUTDIR [FILE...]"
        need_tools
        nodes="$2"; payload="$3"; outdir="${4%/}"; shift 4
        [ -f "$payload" ] || die "$payload: no such payload script"
        [ -z "${NUMALAB:-}" ] || [ -x "$NUMALAB" ] || die "NUMALAB=$NUMALAB is not an executable"
        mkdir -p "$BUILD_DIR/run"
        {
            # `save FILE...` sends files back to the host, under OUTDIR with their guest paths.
            echo 'save() { for f in "$@"; do echo "@@@FILE $f"; cat "$f"; echo "@@@END"; done; }'
            cat "$payload"
        } >"$BUILD_DIR/run/payload.sh"
        initrd="$(make_initrd run "$BUILD_DIR/run/payload.sh" "${NUMALAB:-}" "$@")"
        boot "$nodes" "$initrd" "$BUILD_DIR/run/data.txt"
        rm -rf "$outdir"
        extract "$BUILD_DIR/run/data.txt" "$outdir"
        # Everything the payload printed outside `save` frames.
        awk '/^@@@FILE /{inside=1; next} /^@@@END$/{inside=0; next} /^@@@(BEGIN|RC |DONE)/{next} !inside' "$BUILD_DIR/run/data.txt" >"$outdir/payload.out"
        rc="$(sed -n 's/^@@@RC //p' "$BUILD_DIR/run/data.txt")"
        echo "guest payload exited with status $rc; output in $outdir/payload.out"
        [ "$rc" = 0 ]
        ;;
    damon-kernel)
        [ $# -eq 1 ] || die "usage: $0 damon-kernel"
        damon_kernel
        ;;
    *)
        die "usage: $0 capture NODES OUTDIR | profile NUMALAB_BIN [NUMA_TOUCH_ARGS...] | run NODES PAYLOAD OUTDIR [FILE...] | damon-kernel"
        ;;
esac
