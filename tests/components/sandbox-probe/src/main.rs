//! Reaches for what a component inside hindsight's sandbox must not have: a host file (by the
//! absolute path given as the first argument, and a well-known one), a directory listing, the
//! environment, a TCP connection (to the port given as the second argument) and a file write.
//! It prints a bit set of what succeeded on stdout (WASI 0.2 has no exit codes): 0 means nothing
//! did.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (secret, port) = match args.as_slice() {
        [_, secret, port] => (secret.clone(), port.parse::<u16>().unwrap_or(1)),
        _ => (String::from("/etc/hostname"), 1),
    };
    let mut reached = 0;
    if std::fs::read(&secret).is_ok() {
        reached |= 1;
    }
    if std::fs::read("/etc/passwd").is_ok() || std::fs::read("../../etc/passwd").is_ok() {
        reached |= 2;
    }
    if std::fs::read_dir("/").is_ok() || std::fs::read_dir(".").is_ok() {
        reached |= 4;
    }
    if std::env::vars_os().any(|(k, _)| k != "PWD") {
        reached |= 8;
    }
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        reached |= 16;
    }
    let written = std::path::Path::new(&secret).with_extension("written");
    if std::fs::write(written, b"from the guest").is_ok() {
        reached |= 32;
    }
    println!("{reached}");
}
