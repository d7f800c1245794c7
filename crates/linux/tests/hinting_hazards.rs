//! The kernel behaviour a user-space hinting-fault sampler (docs/live.md, "Towards the dynamic
//! half") has to live with, checked on the running kernel: a page made inaccessible with
//! `mprotect(PROT_NONE)` turns the program's own accesses into SIGSEGV, but a system call that
//! reads or writes it fails with EFAULT instead — no signal, so no chance to restore the page —
//! and protecting one page in the middle of a mapping splits it into three.

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

#[test]
fn the_kernel_touching_a_protected_page_fails_the_system_call_with_efault() {
    const PAGE: usize = 4096;
    // SAFETY: a private anonymous mapping of three pages, checked against MAP_FAILED; the
    // middle page is only passed to system calls while protected, never dereferenced.
    unsafe {
        let base =
            libc::mmap(std::ptr::null_mut(), 3 * PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        assert_ne!(base, libc::MAP_FAILED);
        let mid = (base as *mut u8).add(PAGE);
        std::ptr::write_bytes(base as *mut u8, 1, 3 * PAGE);
        let before = mappings();
        assert_eq!(libc::mprotect(mid as *mut libc::c_void, PAGE, libc::PROT_NONE), 0);
        assert_eq!(mappings(), before + 2, "one protected page splits its mapping in three");

        let mut fds = [0; 2];
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        // The kernel reading the protected page (write(2) from it).
        let w = libc::write(fds[1], mid as *const libc::c_void, 64);
        assert_eq!((w, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::EFAULT)));
        // The kernel writing into it (read(2) into it).
        assert_eq!(libc::write(fds[1], b"x".as_ptr() as *const libc::c_void, 1), 1);
        let r = libc::read(fds[0], mid as *mut libc::c_void, 1);
        assert_eq!((r, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::EFAULT)));

        assert_eq!(libc::mprotect(mid as *mut libc::c_void, PAGE, libc::PROT_READ | libc::PROT_WRITE), 0);
        assert_eq!(mappings(), before, "restoring the protection merges the mapping again");
        assert_eq!(*mid, 1, "the page kept its contents");
        libc::close(fds[0]);
        libc::close(fds[1]);
        libc::munmap(base, 3 * PAGE);
    }
}
