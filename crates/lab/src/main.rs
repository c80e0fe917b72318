//! amplab: the experiments (being written).
fn main() {
    eprintln!("amplab: no experiments yet");
    std::process::exit(2);
}
