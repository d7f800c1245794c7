//! `migrate_pages(2)` through the actuator trait (`PageMover::migrate_pages`, docs/live.md,
//! "Whole-process moves") on a real kernel with two nodes: this test binary boots a 2-node
//! qemu guest (docs/guest.md; `NUMALAB_GUEST_TESTS=1`, skipped otherwise), puts itself in the
//! guest, and runs `inside_the_guest` there: a 4 MiB buffer is placed on node 0 with
//! `move_pages`, then one `migrate_pages(self, [0], [1])` must leave every page of it on node 1.

use numalab_linux::act::pages::{locate, PageMover, SystemPageMover};
use std::path::Path;
use std::process::Command;

const PAGES: usize = 1024;

#[test]
fn migrate_pages_moves_a_whole_process_in_a_two_node_guest() {
    if std::env::var_os("NUMALAB_GUEST_TESTS").is_none() {
        eprintln!("SKIPPED: set NUMALAB_GUEST_TESTS=1 to boot the 2-node guest");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-migrate-pages");
    std::fs::create_dir_all(&tmp).unwrap();
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let payload = tmp.join("payload.sh");
    std::fs::write(
        &payload,
        format!("NUMALAB_INSIDE_GUEST=1 {name} --exact inside_the_guest --nocapture --test-threads 1\necho \"inner rc=$?\"\n"),
    )
    .unwrap();
    let out_dir = tmp.join("out");
    let out = Command::new("bash")
        .arg(root.join("guest/numalab-guest.sh"))
        .args(["run", "2"])
        .arg(&payload)
        .arg(&out_dir)
        .arg(&exe)
        .env("BUILD_DIR", tmp.join("build"))
        .env("GUEST_TIMEOUT_S", "180")
        .output()
        .expect("cannot run guest/numalab-guest.sh");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let printed = std::fs::read_to_string(out_dir.join("payload.out")).unwrap_or_default();
    println!("{printed}");
    assert!(out.status.success(), "guest harness failed:\n{log}\n{printed}");
    assert!(printed.contains("inner rc=0") && printed.contains("test result: ok. 1 passed"), "{printed}");
    assert!(printed.contains("migrate_pages left"), "the inner test ran its checks: {printed}");
}

/// Runs only inside the guest (the outer test sets `NUMALAB_INSIDE_GUEST`).
#[test]
fn inside_the_guest() {
    if std::env::var_os("NUMALAB_INSIDE_GUEST").is_none() {
        return;
    }
    let pid = std::process::id() as i32;
    let mut buf = vec![1u8; PAGES * 4096 + 4096];
    let base = (buf.as_mut_ptr() as u64 + 4095) & !4095;
    let addrs: Vec<u64> = (0..PAGES as u64).map(|p| base + p * 4096).collect();
    for &a in &addrs {
        // SAFETY: inside `buf`; the page is written so it is resident.
        unsafe { std::ptr::write_volatile(a as *mut u8, 2) };
    }
    let mut mover = SystemPageMover::for_process(pid as u32).unwrap();
    let mut status = vec![0i32; PAGES];
    mover.move_pages(pid, &addrs, Some(&vec![0; PAGES]), &mut status).unwrap();
    let on =
        |mover: &mut SystemPageMover, node: i32| locate(mover, pid, &addrs, 512).unwrap().unwrap().iter().filter(|&&s| s == node).count();
    assert_eq!(on(&mut mover, 0), PAGES, "the buffer first on node 0");
    let left = mover.migrate_pages(pid, &[0], &[1]).unwrap();
    println!("migrate_pages left {left} pages");
    assert_eq!(on(&mut mover, 1), PAGES, "every page of the buffer on node 1 after one call");
    // Back again, from a mask that names node 0 and 1 (the position pairing: 1 -> 0).
    mover.migrate_pages(pid, &[1], &[0]).unwrap();
    assert_eq!(on(&mut mover, 0), PAGES);
    // A node the host does not have: the kernel refuses the call.
    assert_eq!(mover.migrate_pages(pid, &[0], &[9]), Err(libc::EINVAL));
    drop(buf);
}
