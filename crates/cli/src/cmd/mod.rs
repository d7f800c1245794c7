//! One module per subcommand; each exposes its clap arguments and a `run` function.

pub mod attach;
pub mod attach_dynamic;
pub mod bench;
pub mod calibrate;
pub mod compare;
pub mod list;
pub mod machine;
pub mod machine_import;
pub mod machine_measure;
pub mod model;
pub mod profile;
pub mod report;
pub mod round_1g;
pub mod run;
pub mod sim;
pub mod study;
pub mod topo;
pub mod vm;
pub mod workload;
