//! The page classes an oracle policy is given (docs/policies/oracle.md, "Class knowledge"): for
//! each address space, which pages belong to which DUnX class and the class's parameters. The
//! driver that knows the workload (the simulator, from a workload's `runs` regions) builds this
//! map and hands it over in [`crate::PolicyEnv::page_classes`]; a policy never reads a workload.

use crate::decision::SpaceId;
use numalab_core::PageIdx;

/// The five DUnX page classes (docs/model.md §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PageClass {
    /// Private to one process.
    Pr,
    /// Shared, never written.
    Ro,
    /// Shared, rarely written.
    Rm,
    /// Read-write shared in long single-process runs.
    Ss,
    /// Read-write shared with fine interleaving.
    Sp,
}

impl PageClass {
    pub const ALL: [PageClass; 5] = [PageClass::Pr, PageClass::Ro, PageClass::Rm, PageClass::Ss, PageClass::Sp];

    pub fn parse(s: &str) -> Option<PageClass> {
        PageClass::ALL.into_iter().find(|c| c.as_str().eq_ignore_ascii_case(s))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PageClass::Pr => "PR",
            PageClass::Ro => "RO",
            PageClass::Rm => "RM",
            PageClass::Ss => "SS",
            PageClass::Sp => "SP",
        }
    }

    /// RO and RM: the classes the model replicates (or leaves static), never migrates.
    pub fn is_read_shared(self) -> bool {
        matches!(self, PageClass::Ro | PageClass::Rm)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One run of pages of a class in one address space, with the class's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassRegion {
    pub space: SpaceId,
    /// First page, in the space's own page numbering.
    pub first_page: PageIdx,
    pub pages: u64,
    pub class: PageClass,
    /// `M_c`: processes that use each page.
    pub sharers: u32,
    /// `r̂_c`: references one process makes to a page in one run.
    pub run_refs: f64,
    /// `ŵ_c = min(w_c, T_c)`: references between two writes by others.
    pub write_run_refs: f64,
    /// `W_c > 0`.
    pub written: bool,
}

impl ClassRegion {
    fn contains(&self, space: SpaceId, page: PageIdx) -> bool {
        space == self.space && page >= self.first_page && page - self.first_page < self.pages
    }
}

/// Every classified page of a run, as regions sorted by space and first page; pages outside
/// every region have no class.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageClasses {
    regions: Vec<ClassRegion>,
}

impl PageClasses {
    /// Sort the regions and check that they do not overlap and that their parameters are
    /// usable (a sentence naming the region otherwise).
    pub fn new(mut regions: Vec<ClassRegion>) -> Result<PageClasses, String> {
        regions.retain(|r| r.pages > 0);
        regions.sort_by_key(|r| (r.space, r.first_page));
        for r in &regions {
            let name = format!("{} pages at space {} page {}", r.class.as_str(), r.space, r.first_page);
            if r.sharers == 0 {
                return Err(format!("{name}: sharers must be at least 1"));
            }
            if r.run_refs.is_nan() || r.run_refs < 1.0 || r.write_run_refs.is_nan() || r.write_run_refs < 1.0 {
                return Err(format!("{name}: run lengths must be at least 1 reference"));
            }
        }
        for w in regions.windows(2) {
            if w[0].space == w[1].space && w[0].first_page + w[0].pages > w[1].first_page {
                return Err(format!(
                    "class regions overlap in space {}: pages {}.. ({}) and {}.. ({})",
                    w[0].space,
                    w[0].first_page,
                    w[0].class.as_str(),
                    w[1].first_page,
                    w[1].class.as_str()
                ));
            }
        }
        Ok(PageClasses { regions })
    }

    pub fn regions(&self) -> &[ClassRegion] {
        &self.regions
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Index (into [`PageClasses::regions`]) of the region holding the page.
    pub fn region_of(&self, space: SpaceId, page: PageIdx) -> Option<usize> {
        let i = self.regions.partition_point(|r| (r.space, r.first_page) <= (space, page));
        i.checked_sub(1).filter(|&i| self.regions[i].contains(space, page))
    }
}
