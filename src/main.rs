fn main() {
    let code = sexton::cli::main(std::env::args_os().collect());
    sexton::logging::flush();
    std::process::exit(code);
}
