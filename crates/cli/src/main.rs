//! The `switchyard` command; everything it does lives in the library.

/// The gateway allocates a few dozen small objects per request, and its
/// history writer frees on one thread what the request path allocated on
/// another; mimalloc does both with fewer instructions than the system
/// allocator (9% fewer instructions per request under load: bench/instructions).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    switchyard_cli::run()
}
