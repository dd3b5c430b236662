//! Workloads, device benchmarks and reports for the Keel storage engine.
//! Nothing in the engine depends on this crate.

pub mod bank;
pub mod basic;
pub mod cgroup;
pub mod chart;
pub mod durability;
pub mod innodb;
pub mod iobench;
pub mod oltp;
pub mod sys;

#[cfg(test)]
mod testing;
