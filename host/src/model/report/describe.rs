//! The report's words for what the hypervisor sends as numbers: a guest call by its function
//! ID, a PMU figure by event and EL, how the run ended. The problems the parser and the
//! checks list and every renderer use them, so that one thing reads the same everywhere.

use mtex_abi::report::{ExitReason, PmuCount, PowerCall};

/// A guest call's name, by its function ID: mtex's calls and PSCI's that end the run.
pub fn call_name(function: u64) -> String {
    use mtex_abi::hypercall as hc;
    let known = [
        (hc::VERSION, "VERSION"),
        (hc::PHASE_BEGIN, "PHASE_BEGIN"),
        (hc::PHASE_END, "PHASE_END"),
        (hc::CONSOLE_WRITE, "CONSOLE_WRITE"),
        (hc::EXIT, "EXIT"),
        (hc::PHASE_ITERATION, "PHASE_ITERATION"),
        (0x8400_0008, "PSCI SYSTEM_OFF"),
        (0x8400_0009, "PSCI SYSTEM_RESET"),
        (0x8400_0012, "PSCI SYSTEM_RESET2"),
        (0xc400_0012, "PSCI SYSTEM_RESET2"),
    ];
    match known.iter().find(|(id, _)| u64::from(*id) == function) {
        Some((_, name)) => format!("{name} ({function:#x})"),
        None => format!("{function:#x}"),
    }
}

/// `mem_access_checked_rd:k`, `raw.0x0013:u`: a PMU figure's name as the report shows it.
pub fn pmu_count_name(c: &PmuCount) -> String {
    let el = if c.el == 1 { "k" } else { "u" };
    match mtex_abi::report::pmu_event::name(c.event) {
        Some(n) if !c.raw => format!("{n}:{el}"),
        _ => format!("raw.{:#06x}:{el}", c.event),
    }
}

/// One line saying how the run ended.
pub fn describe_exit(e: &ExitReason) -> String {
    match *e {
        ExitReason::GuestExit { status } => format!("guest exited with status {status}"),
        ExitReason::GuestSystemOff => "guest called PSCI SYSTEM_OFF".into(),
        ExitReason::GuestSystemReset => "guest called PSCI SYSTEM_RESET".into(),
        ExitReason::UnhandledGuestExit {
            esr,
            far,
            hpfar,
            at,
        } => {
            let e = mtex_arch::Esr(esr);
            // A register of a feature the guest was told it does not have: say which.
            let hidden = (e.ec_bits() == 0x18)
                .then(|| e.sysreg_iss())
                .and_then(|iss| {
                    let (reg, feature) = mtex_arch::id_regs::hidden_register(iss)?;
                    Some(format!(
                        "{} {reg}, a register of {feature}, which the ID registers hide from \
                         the guest; ",
                        if iss.is_read { "MRS" } else { "MSR" }
                    ))
                })
                .unwrap_or_default();
            format!(
                "unhandled guest exit: {hidden}{} (EC {:#04x}) ESR_EL2={esr:#x} ELR={:#x} EL{} FAR={far:#x} IPA={hpfar:#x}",
                e.ec().name(),
                e.ec_bits(),
                at.pc,
                at.el
            )
        }
        ExitReason::Watchdog { budget_ms, at } => format!(
            "watchdog: the guest ran past its {budget_ms} ms budget (at pc {:#x}, EL{})",
            at.pc, at.el
        ),
        ExitReason::HypException {
            vector,
            esr,
            elr,
            far,
        } => format!(
            "hypervisor exception: vector {vector} ESR_EL2={esr:#x} ELR_EL2={elr:#x} FAR_EL2={far:#x}"
        ),
        ExitReason::HypPanic { message } => format!("hypervisor panic: {message}"),
        ExitReason::TraceUnsupported { at, reason } => {
            format!("trace stopped at pc {:#x} (EL{}): {reason}", at.pc, at.el)
        }
        ExitReason::BootFailed { reason } => format!("boot failed: {reason}"),
        ExitReason::ProtectedWrite {
            far,
            ipa,
            phase,
            at,
        } => format!(
            "the guest wrote {far:#x} (IPA {ipa:#x}) at pc {:#x} EL{}, in the guest's code or \
             read-only data, which are read-only while phase {phase} is open (its harness's \
             code, and the guest's that runs after it): the write was stopped, and the run \
             ended there",
            at.pc, at.el
        ),
    }
}

/// `CPU 0: CPU_ON of 0x1 at 0x40081000 (context 0x0) at pc 0x40080010: INVALID_ADDRESS`.
pub fn describe_power_call(c: &PowerCall) -> String {
    use smccc::psci::{PSCI_CPU_OFF, PSCI_CPU_ON_32, PSCI_CPU_ON_64};
    let call = match c.function {
        PSCI_CPU_ON_32 | PSCI_CPU_ON_64 => format!(
            "CPU_ON of {:#x} at {:#x} (context {:#x})",
            c.target, c.entry, c.context_id
        ),
        PSCI_CPU_OFF => "CPU_OFF".to_string(),
        f => format!("PSCI {f:#x}"),
    };
    let answer = match c.result {
        0 => "SUCCESS".to_string(),
        e => psci_error_name(e),
    };
    let phase = if c.phase != 0 {
        format!(", phase {} open", c.phase)
    } else {
        String::new()
    };
    format!(
        "CPU {}: {call} at pc {:#x}: {answer}{phase}",
        c.cpu, c.at.pc
    )
}

/// A PSCI error code's name as the PSCI specification spells it.
fn psci_error_name(code: i32) -> String {
    use smccc::psci::error::*;
    match code {
        NOT_SUPPORTED => "NOT_SUPPORTED",
        INVALID_PARAMETERS => "INVALID_PARAMETERS",
        DENIED => "DENIED",
        ALREADY_ON => "ALREADY_ON",
        ON_PENDING => "ON_PENDING",
        INTERNAL_FAILURE => "INTERNAL_FAILURE",
        NOT_PRESENT => "NOT_PRESENT",
        DISABLED => "DISABLED",
        INVALID_ADDRESS => "INVALID_ADDRESS",
        other => return format!("error {other}"),
    }
    .to_string()
}

/// Why a guest PMU counter's count is not exact (`GuestPmuInexact`), as a problem.
pub fn guest_pmu_inexact(e: &mtex_abi::report::GuestPmuInexact) -> String {
    use mtex_abi::report::GuestPmuInexactReason as Why;
    let event = (e.evtyper & 0xffff) as u16;
    let named = match mtex_abi::report::pmu_event::name(event) {
        Some(n) => format!("{n}, type {:#x}", e.evtyper),
        None => format!("event {event:#06x}, type {:#x}", e.evtyper),
    };
    let head = format!(
        "CPU {}'s PMU counter {} ({named}) at pc {:#x}",
        e.cpu, e.counter, e.at.pc
    );
    match e.reason {
        Why::Untraced => format!(
            "{head} counted while nothing was traced whole on that CPU (outside a traced \
             window, or in a sampled one): only traced time adds to it, so the guest's figure \
             for it (perf's inside the guest) is not a count"
        ),
        Why::NoHardware => format!(
            "{head} is one the hypervisor adds for the MTE events only: it has nothing to count \
             another event with, so the guest's figure for it is not a count"
        ),
        Why::InterruptLost => format!(
            "{head} overflowed with its interrupt enabled; it has no hardware behind it and no \
             interrupt was raised, so a guest that adds up overflows (perf) lost a wrap of it"
        ),
    }
}
