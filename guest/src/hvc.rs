//! Calls to the hypervisor (ABI: `mtex_abi::hypercall`), through smccc's HVC conduit.

use mtex_abi::hypercall as hc;

/// PHASE_END's function ID in the two halves a `movz`/`movk` pair takes.
pub const PHASE_END_LO: u32 = hc::PHASE_END & 0xffff;
pub const PHASE_END_HI: u32 = hc::PHASE_END >> 16;

/// The four instructions that close phase `x15` from inside an asm block (so a traced phase
/// ends without any compiler-generated code): the caller passes
/// `end_lo = const PHASE_END_LO, end_hi = const PHASE_END_HI`.
macro_rules! phase_end_call {
    () => {
        "movz x0, #{end_lo}\nmovk x0, #{end_hi}, lsl #16\nmov x1, x15\nhvc #0"
    };
}
pub(crate) use phase_end_call;

fn call(function: u32, args: &[u64]) -> u64 {
    let mut a = [0u64; 17];
    a[..args.len()].copy_from_slice(args);
    smccc::hvc64(function, a)[0]
}

/// Opens phase `id` named `name`; with `traced`, the hypervisor single-steps it.
pub fn phase_begin(id: u32, name: &str, traced: bool) -> u64 {
    let r: [u64; 4] = hc::pack_bytes(name.as_bytes());
    let flags = if traced { hc::PHASE_TRACED } else { 0 };
    call(hc::PHASE_BEGIN, &[id as u64, r[0], r[1], r[2], r[3], flags])
}

/// Opens traced phase `id` for one (policy, workload) run of the kernel scenario.
pub fn phase_begin_run(id: u32, name: &str, params: &mtex_abi::scenario::PhaseParams) -> u64 {
    let r: [u64; 4] = hc::pack_bytes(name.as_bytes());
    let p = params.to_regs();
    let flags = hc::PHASE_TRACED | hc::PHASE_PARAMS;
    call(
        hc::PHASE_BEGIN,
        &[
            id as u64, r[0], r[1], r[2], r[3], flags, p[0], p[1], p[2], p[3],
        ],
    )
}

/// Closes phase `id`.
pub fn phase_end(id: u32) -> u64 {
    call(hc::PHASE_END, &[id as u64])
}

/// Writes console bytes, 48 per call.
pub fn console_write(bytes: &[u8]) {
    for chunk in bytes.chunks(hc::CONSOLE_BYTES_PER_CALL) {
        let r: [u64; 6] = hc::pack_bytes(chunk);
        call(
            hc::CONSOLE_WRITE,
            &[chunk.len() as u64, r[0], r[1], r[2], r[3], r[4], r[5]],
        );
    }
}

/// Makes an arbitrary call (used to probe the hypervisor's handling of unknown IDs).
pub fn raw(function: u32) -> u64 {
    call(function, &[])
}

/// Ends the run with `status` (0 = success).
pub fn exit(status: u64) -> ! {
    call(hc::EXIT, &[status]);
    loop {
        aarch64_cpu::asm::wfe();
    }
}
