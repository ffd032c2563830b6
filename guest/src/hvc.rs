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

/// PHASE_BEGIN's arguments for traced phase `id` named `name`: (x0, x1, x2..x5, x6).
pub fn begin_args(id: u64, name: &str) -> (u64, u64, [u64; 4], u64) {
    (
        hc::PHASE_BEGIN as u64,
        id,
        hc::pack_bytes(name.as_bytes()),
        hc::PHASE_TRACED,
    )
}

/// One phase in a single asm block, so that no compiler-generated instruction is in it: the
/// lines of `before` (outside the phase), the PHASE_BEGIN call, the lines of `body`, and the
/// phase-end call (`phase_end_call!`). x0..x6 and x15 carry the calls' arguments; the
/// operands that follow are the body's own (explicit registers). Evaluates to x0 after the
/// last call: the PHASE_END result (SUCCESS, 0, when the phase opened and closed).
macro_rules! phase_asm {
    (
        id: $id:expr, name: $name:expr, traced: $traced:expr,
        before: [$($before:expr),* $(,)?],
        body: [$($body:expr),+ $(,)?],
        $($operands:tt)*
    ) => {{
        let (x0, id, name, flags) = $crate::hvc::begin_args($id, $name);
        let flags = if $traced { flags } else { 0 };
        let r: u64;
        // SAFETY: the HVCs are mtex calls that change only x0 and x1 (both declared); what the
        // body touches is said by each caller (only memory this program owns, and registers
        // declared here).
        unsafe {
            core::arch::asm!(
                $($before,)*
                "hvc #0",
                $($body,)+
                $crate::hvc::phase_end_call!(),
                end_lo = const $crate::hvc::PHASE_END_LO,
                end_hi = const $crate::hvc::PHASE_END_HI,
                inout("x0") x0 => r,
                inout("x1") id => _,
                in("x2") name[0],
                in("x3") name[1],
                in("x4") name[2],
                in("x5") name[3],
                in("x6") flags,
                in("x15") id,
                $($operands)*
            )
        };
        r
    }};
}
pub(crate) use phase_asm;

fn call(function: u32, args: &[u64]) -> u64 {
    call2(function, args)[0]
}

/// A call whose x0 and x1 both carry results.
fn call2(function: u32, args: &[u64]) -> [u64; 2] {
    let mut a = [0u64; 17];
    a[..args.len()].copy_from_slice(args);
    let r = smccc::hvc64(function, a);
    [r[0], r[1]]
}

/// Opens phase `id` named `name`; with `traced`, the hypervisor single-steps it.
pub fn phase_begin(id: u32, name: &str, traced: bool) -> u64 {
    phase_begin_flags(id, name, if traced { hc::PHASE_TRACED } else { 0 })
}

/// Opens phase `id` named `name` with PHASE_BEGIN flags `flags` (`PHASE_TRACED`,
/// `PHASE_AGAIN`; not `PHASE_PARAMS`).
pub fn phase_begin_flags(id: u32, name: &str, flags: u64) -> u64 {
    let r: [u64; 4] = hc::pack_bytes(name.as_bytes());
    call(hc::PHASE_BEGIN, &[id as u64, r[0], r[1], r[2], r[3], flags])
}

/// Opens phase `id` for one (policy, workload) run of the kernel scenario: traced or not,
/// and with `again` another phase of the run the previous phase measured. Untraced phases
/// are repeatable (the kernel runs as many passes as the hypervisor asks for); with
/// `watch_tco` their passes include the TCO watch's.
pub fn phase_begin_run(
    id: u32,
    name: &str,
    params: &mtex_abi::scenario::PhaseParams,
    traced: bool,
    again: bool,
    watch_tco: bool,
) -> u64 {
    let r: [u64; 4] = hc::pack_bytes(name.as_bytes());
    let p = params.to_regs();
    let flags = if traced { hc::PHASE_TRACED } else { 0 }
        | if again { hc::PHASE_AGAIN } else { 0 }
        | if traced { 0 } else { hc::PHASE_REPEATABLE }
        | if watch_tco { hc::PHASE_WATCH_TCO } else { 0 }
        | hc::PHASE_PARAMS;
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

/// Closes phase `id`: Ok(how many more untraced passes its run needs), or the error.
pub fn phase_end_passes(id: u32) -> Result<u64, u64> {
    match call2(hc::PHASE_END, &[id as u64]) {
        [hc::ret::SUCCESS, more] => Ok(more),
        [err, _] => Err(err),
    }
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
