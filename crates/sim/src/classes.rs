//! The class map the simulator hands the oracle policies (docs/policies/oracle.md, "Class
//! knowledge"): the DUnX class of every page of a workload's `runs` regions, one address space
//! per process (a mix's member `k` is space `k`, its pages numbered from 0).

use crate::SimError;
use numalab_policy::oracle::{ClassRegion, PageClass, PageClasses};
use numalab_policy::SpaceId;
use numalab_workload::Program;
use std::sync::Arc;

/// `None` when no page of the program has a class.
pub fn page_classes(program: &Program) -> Result<Option<Arc<PageClasses>>, SimError> {
    let spaces: Vec<&Program> =
        if program.members.is_empty() { vec![program] } else { program.members.iter().map(|m| &m.program).collect() };
    let mut regions = Vec::new();
    for (space, p) in spaces.into_iter().enumerate() {
        for c in p.synth_class_pages() {
            let class = PageClass::parse(c.class.as_str())
                .ok_or_else(|| SimError::Internal(format!("workload class {} has no policy class", c.class.as_str())))?;
            regions.push(ClassRegion {
                space: space as SpaceId,
                first_page: c.first_page,
                pages: c.pages,
                class,
                sharers: u32::try_from(c.sharers).unwrap_or(u32::MAX),
                run_refs: c.run_refs as f64,
                write_run_refs: c.write_run_refs,
                written: c.written,
            });
        }
    }
    if regions.is_empty() {
        return Ok(None);
    }
    PageClasses::new(regions).map(|c| Some(Arc::new(c))).map_err(|e| SimError::Internal(format!("page classes: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_core::machine::presets;
    use numalab_workload::{compile, compile_spec, presets as wp, CompileOptions, WorkloadSpec};

    fn synth(copies: u32) -> Program {
        let m = presets::load("gp1000").unwrap();
        let mut file = wp::load("dunx-synth").unwrap();
        file.workload.copies = copies;
        let opts = CompileOptions { threads: Some(8), scale: 1.0 };
        if copies > 1 {
            compile_spec(&WorkloadSpec::Single(file), "dunx-synth", &m, &opts).unwrap()
        } else {
            compile(&file, "dunx-synth", &m, &opts).unwrap()
        }
    }

    #[test]
    fn the_synth_preset_classes_land_on_their_regions() {
        let p = synth(1);
        let c = page_classes(&p).unwrap().unwrap();
        let got: Vec<(PageClass, u64, u32, f64, f64, bool)> =
            c.regions().iter().map(|r| (r.class, r.pages, r.sharers, r.run_refs, r.write_run_refs, r.written)).collect();
        // The preset's rows (docs/model.md §3.1): PR 10 pages per thread; r̂ = min(r, T) and
        // ŵ = min(w, T), T = reads + writes per page and sharer (RO: w = ∞, so ŵ = T).
        assert_eq!(
            got,
            vec![
                (PageClass::Pr, 80, 1, 11000.0, 11000.0, true),
                (PageClass::Ro, 16, 8, 2000.0, 20000.0, false),
                (PageClass::Rm, 16, 4, 1000.0, 5000.0, true),
                (PageClass::Ss, 8, 2, 2500.0, 2500.0, true),
                (PageClass::Sp, 8, 8, 100.0, 200.0, true),
            ]
        );
        for r in c.regions() {
            let layout = p.regions.iter().find(|l| l.name == r.class.as_str()).unwrap();
            assert_eq!((r.space, r.first_page, r.pages), (0, layout.first_page, layout.pages), "{:?}", r.class);
        }
    }

    #[test]
    fn a_mix_gives_each_member_its_own_space() {
        let p = synth(2);
        let c = page_classes(&p).unwrap().unwrap();
        assert_eq!(c.regions().len(), 10);
        for space in 0..2 {
            let member = &p.members[space as usize].program;
            let ss = c.regions().iter().find(|r| r.space == space && r.class == PageClass::Ss).unwrap();
            let layout = member.regions.iter().find(|l| l.name == "SS").unwrap();
            assert_eq!(ss.first_page, layout.first_page, "pages numbered within the member");
        }
    }

    #[test]
    fn a_workload_without_runs_regions_has_no_classes() {
        let m = presets::load("gp1000").unwrap();
        let file = wp::load("cg-like").unwrap();
        let p = compile(&file, "cg-like", &m, &CompileOptions { threads: Some(8), scale: 0.001 }).unwrap();
        assert_eq!(page_classes(&p).unwrap(), None);
    }
}
