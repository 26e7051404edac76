fn main() {
    std::process::exit(sexton::cli::main(std::env::args_os().collect()));
}
