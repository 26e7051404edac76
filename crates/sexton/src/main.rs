//! `sexton`: the in-pod supervisor. Everything is in the library (`cli::main` dispatches);
//! this only flushes the log queue before the process ends with the child's verdict.

fn main() {
    let code = sexton::cli::main(std::env::args_os().collect());
    sexton::logging::flush();
    std::process::exit(code);
}
