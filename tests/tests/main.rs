//! The end-to-end suite: one test binary (each links wasmtime and the component, so one link
//! instead of one per file), a module per area.

mod access;
mod cli;
mod conformance;
mod contract;
mod crash;
mod distill;
mod end_to_end;
mod hard_edges;
mod isolation;
mod lifecycle;
mod panel_cli;
mod parity;
mod postgres;
mod settings_doc;
mod trust;
mod write_judgement;
