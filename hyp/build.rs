//! Links the hypervisor with its own linker script when built for the bare-metal target.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    if std::env::var("TARGET")
        .unwrap()
        .starts_with("aarch64-unknown-none")
    {
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
    }
    println!("cargo:rerun-if-changed=link.ld");
}
