//! Links the hypervisor with its own linker script, as a position-independent executable,
//! when built for the bare-metal target.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    if std::env::var("TARGET")
        .unwrap()
        .starts_with("aarch64-unknown-none")
    {
        println!("cargo:rustc-link-arg-bins=-T{dir}/link.ld");
        // Position-independent: linked at 0, relocated by `_start` wherever it is loaded.
        // Read-only data holding addresses (vtables) needs relocations too, hence notext.
        println!("cargo:rustc-link-arg-bins=--pie");
        println!("cargo:rustc-link-arg-bins=-znotext");
    }
    println!("cargo:rerun-if-changed=link.ld");
}
