//! The `switchyard` command; everything it does lives in the library.

fn main() -> std::process::ExitCode {
    switchyard_cli::run()
}
