//! Shared by the examples: the test kernels' PTX and the exit convention.
pub mod kernels;

use vyre_cuda::Status;

/// Runs an example's body and exits the way the C, Python and Go examples
/// do: 0 (after "NAME: OK") when it returns; 2 when this machine cannot run
/// CUDA work (no driver, a driver too old, no device); 1 on any other error
/// or a wrong element. A library error is printed to stderr as the C
/// examples print it, "NAME: CALL failed: STATUS (CUresult N)" and then the
/// library's message, which ends with a "Fix:" sentence.
pub fn main(name: &str, run: impl FnOnce() -> Result<(), Box<dyn std::error::Error>>) -> ! {
    let error = match run() {
        Ok(()) => {
            println!("{name}: OK");
            std::process::exit(0);
        }
        Err(error) => error,
    };
    let Some(e) = error.downcast_ref::<vyre_cuda::Error>() else {
        eprintln!("{name}: {error}");
        std::process::exit(1);
    };
    eprintln!(
        "{name}: {} failed: {} (CUresult {})\n  {}",
        e.call(),
        e.status().name(),
        e.cu_result(),
        e.message()
    );
    let no_gpu = matches!(
        e.status(),
        Status::NoDriver | Status::DriverTooOld | Status::NoDevice
    );
    std::process::exit(if no_gpu { 2 } else { 1 });
}
