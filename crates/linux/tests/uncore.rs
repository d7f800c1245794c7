//! Uncore IMC discovery (docs/profile.md, "Memory controllers") on hand-written sysfs text in
//! the kernel's exact formats (tests/fixtures/intel-2s-imc, see its README), on the captured
//! guests (no uncore PMU) and on this host.

use numalab_linux::sysfs::uncore::{read_imc, Imc, NO_IMC_PMU};
use numalab_linux::FsRoot;
use std::path::Path;

fn root(name: &str) -> FsRoot {
    FsRoot::at(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name))
}

#[test]
fn two_socket_intel_server_has_one_controller_per_channel_and_package() {
    let Imc::Controllers(c) = read_imc(&root("intel-2s-imc")).unwrap() else { panic!("no controllers") };
    // Three channel PMUs × two packages (cpumask 0,28); the free-running PMU is not one.
    assert_eq!(c.len(), 6);
    let got: Vec<(u32, &str, u32, u32, Option<u32>)> = c.iter().map(|x| (x.index, x.pmu.as_str(), x.type_, x.cpu, x.node)).collect();
    assert_eq!(
        got,
        vec![
            (0, "uncore_imc_0", 13, 0, Some(0)),
            (1, "uncore_imc_0", 13, 28, Some(1)),
            (2, "uncore_imc_1", 14, 0, Some(0)),
            (3, "uncore_imc_1", 14, 28, Some(1)),
            (4, "uncore_imc_2", 15, 0, Some(0)),
            (5, "uncore_imc_2", 15, 28, Some(1)),
        ]
    );
    // event=0x04,umask=0x03 with event → config:0-7, umask → config:8-15.
    assert_eq!(c[0].read.config, 0x0304);
    assert_eq!(c[0].write.config, 0x0c04);
    assert_eq!((c[0].read.scale, c[0].read.unit.as_str()), (6.103515625e-5, "MiB"));
    assert_eq!(c[0].read.bytes_per_count(), Some(64.0));
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        for e in walk(from) {
            let rel = e.strip_prefix(from).unwrap();
            let dst = to.join(rel);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(&e, &dst).unwrap();
        }
    };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/intel-2s-imc");
    copy(&src, dir.path());
    let pmu = dir.path().join("sys/bus/event_source/devices/uncore_imc_1");
    std::fs::write(pmu.join("events/cas_count_write"), "event=0x04,umask=zz\n").unwrap();
    let e = read_imc(&FsRoot::at(dir.path())).unwrap_err().to_string();
    assert!(e.contains("uncore_imc_1/events/cas_count_write") && e.contains("`umask=zz`"), "{e}");
    std::fs::write(pmu.join("events/cas_count_write"), "event=0x04,umask=0x0c\n").unwrap();
    std::fs::write(pmu.join("type"), "uncore\n").unwrap();
    let e = read_imc(&FsRoot::at(dir.path())).unwrap_err().to_string();
    assert!(e.contains("uncore_imc_1/type") && e.contains("not a PMU type"), "{e}");
    std::fs::write(pmu.join("type"), "14\n").unwrap();
    std::fs::write(pmu.join("events/cas_count_read.scale"), "0\n").unwrap();
    let e = read_imc(&FsRoot::at(dir.path())).unwrap_err().to_string();
    assert!(e.contains("cas_count_read.scale"), "{e}");
    // Without the CAS aliases a PMU is no controller; with none left, unsupported says why.
    for k in 0..3 {
        let p = dir.path().join(format!("sys/bus/event_source/devices/uncore_imc_{k}/events"));
        std::fs::remove_file(p.join("cas_count_read")).unwrap();
    }
    assert_eq!(
        read_imc(&FsRoot::at(dir.path())).unwrap(),
        Imc::Unsupported(
            "uncore_imc_0, uncore_imc_1, uncore_imc_2 without cas_count_read / cas_count_write events (client or free-running counters are not read)"
                .into()
        )
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn guests_have_no_imc_pmu() {
    for g in ["guest-1n", "guest-2n", "guest-4n"] {
        assert_eq!(read_imc(&root(g)).unwrap(), Imc::Unsupported(NO_IMC_PMU.into()), "{g}");
    }
}

#[test]
fn this_host_says_unsupported_or_lists_controllers() {
    let host = FsRoot::host();
    let has_imc = host.list("/sys/bus/event_source/devices").unwrap_or_default().iter().any(|n| n.starts_with("uncore_imc"));
    match read_imc(&host).unwrap() {
        Imc::Unsupported(why) if !has_imc => assert_eq!(why, NO_IMC_PMU),
        Imc::Unsupported(_) => {} // IMC PMUs without the server CAS aliases
        Imc::Controllers(c) => assert!(has_imc && !c.is_empty()),
    }
}

#[test]
fn planning_expands_imc_and_names_what_cannot_be_counted() {
    use numalab_linux::session::plan_imc;
    let imc = read_imc(&root("intel-2s-imc")).unwrap();
    let req: Vec<String> = ["sw.page_faults", "imc", "imc.read[7]"].iter().map(|s| s.to_string()).collect();
    let (all, plans, unsupported) = plan_imc(&req, &imc);
    assert_eq!(all.len(), 1 + 12 + 1);
    assert_eq!(&all[..3], ["sw.page_faults", "imc.read[0]", "imc.write[0]"]);
    assert_eq!(plans.len(), 6);
    assert_eq!((plans[1].controller, plans[1].cpu), (1, 28));
    assert_eq!(plans[1].events, ["imc.read[1]", "imc.write[1]"]);
    assert_eq!((plans[1].encodings[0].type_, plans[1].encodings[0].config), (13, 0x304));
    assert_eq!(plans[5].encodings[1].config, 0xc04);
    assert_eq!(unsupported.len(), 1);
    assert_eq!(unsupported[0].name, "imc.read[7]");
    assert_eq!(unsupported[0].value, None);
    assert_eq!(unsupported[0].reason.as_deref(), Some("no memory controller imc.read[7] on this host (it has 6: 0 to 5)"));

    // A guest: `imc` expands to nothing; a named controller is unsupported with the reason.
    let (all, plans, unsupported) = plan_imc(&req, &read_imc(&root("guest-2n")).unwrap());
    assert_eq!(all, ["sw.page_faults", "imc.read[7]"]);
    assert!(plans.is_empty());
    assert_eq!(unsupported[0].reason.as_deref(), Some(NO_IMC_PMU));
}
