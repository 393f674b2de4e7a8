//! Shared by the examples.
pub mod kernels;
