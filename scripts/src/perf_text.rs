//! The perf-stat-like text report (100 columns) — being written.
