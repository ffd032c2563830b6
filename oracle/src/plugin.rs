//! The QEMU side: registering the hooks and feeding [`Counter`]. Kept thin: what each hook
//! means is decided in `count` and `classify`, which are tested on the host.

use crate::classify::{Class, classify};
use crate::count::Counter;
use mtex_abi::oracle::{CLOSE_ID_REG, OPEN_ID_REG};
use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{qemu_plugin_cond, qemu_plugin_u64};
use qemu_plugin::{
    CallbackFlags, MemRW, PluginId, RegisterDescriptor, TranslationBlock, VCPUIndex,
    qemu_plugin_get_registers, qemu_plugin_register_atexit_cb, qemu_plugin_u64_set, register,
};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

/// The registers the hooks read: PSTATE (gdb's "cpsr", EL in bits 3:2), VBAR_EL1 (QEMU's
/// "VBAR") and the markers' id registers.
struct Regs {
    cpsr: RegisterDescriptor<'static>,
    vbar_el1: RegisterDescriptor<'static>,
    open_id: RegisterDescriptor<'static>,
    close_id: RegisterDescriptor<'static>,
}

impl Regs {
    fn find() -> Option<Self> {
        let mut all = qemu_plugin_get_registers().ok()?;
        let mut take = |name: &str| {
            let i = all.iter().position(|r| r.name == name)?;
            Some(all.swap_remove(i))
        };
        Some(Self {
            cpsr: take("cpsr")?,
            vbar_el1: take("VBAR")?,
            open_id: take(&format!("x{OPEN_ID_REG}"))?,
            close_id: take(&format!("x{CLOSE_ID_REG}"))?,
        })
    }
}

fn read_u64(r: &RegisterDescriptor<'static>) -> Option<u64> {
    let bytes = r.read().ok()?;
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    Some(u64::from_le_bytes(b))
}

/// Two per-vCPU flags QEMU tests inline before each hook, so that a hook that has nothing to
/// do costs a compare, not a call: at offset 0 "a window is open" (translation blocks' hooks,
/// which read the EL), at offset 8 "a window is open and the guest is running" (the
/// instructions' hooks). EL2's instructions, thousands per step, then cost no instruction
/// hook (their memory hooks, which QEMU cannot make conditional, still run, and return at
/// once).
#[derive(Clone, Copy)]
struct Flags {
    open: qemu_plugin_u64,
    guest: qemu_plugin_u64,
}
// SAFETY: the scoreboard pointer is QEMU's, valid for the plugin's life and only used through
// QEMU's scoreboard API (one vCPU: Linux mode runs one).
unsafe impl Send for Flags {}
// SAFETY: as above.
unsafe impl Sync for Flags {}

struct State {
    counter: Counter,
    regs: Option<Regs>,
    out: Option<PathBuf>,
    flags: Option<Flags>,
    /// The EL the running translation block executes at (a block never spans an EL change:
    /// exceptions and exception returns end blocks), read once per block.
    el: u8,
    /// The running block starts at one of VBAR_EL1's entries, at this pc.
    vector: Option<u64>,
    missing_regs: bool,
    /// A vCPU other than the first: the counter is for one (Linux mode runs one).
    more_vcpus: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    counter: Counter::new(),
    regs: None,
    out: None,
    flags: None,
    el: 0,
    vector: None,
    missing_regs: false,
    more_vcpus: false,
});

fn el_of(regs: &Regs) -> Option<u8> {
    read_u64(&regs.cpsr).map(|p| ((p >> 2) & 3) as u8)
}

/// A marker executed: only at EL2 is it the hypervisor's.
fn on_marker(vcpu: VCPUIndex, open: bool) {
    let mut s = STATE.lock().unwrap();
    let Some(regs) = &s.regs else { return };
    if el_of(regs) != Some(2) {
        return;
    }
    let id = read_u64(if open { &regs.open_id } else { &regs.close_id }).unwrap_or(0);
    if open {
        s.counter.open(id);
    } else {
        s.counter.close(id);
    }
    if let Some(f) = s.flags {
        qemu_plugin_u64_set(f.open, vcpu, s.counter.is_open() as u64);
        // Still at EL2: the next block's hook says when the guest runs.
        qemu_plugin_u64_set(f.guest, vcpu, 0);
    }
}

/// A translation block starts while a window is open: the EL it runs at.
fn on_block(vcpu: VCPUIndex, pc: u64) {
    let mut s = STATE.lock().unwrap();
    let Some(el) = s.regs.as_ref().and_then(el_of) else {
        s.missing_regs = true;
        return;
    };
    s.el = el;
    // Vector entries are 128-byte aligned: VBAR_EL1 is read only for such a block.
    s.vector = None;
    if el == 1
        && pc & 0x7f == 0
        && let Some(vbar) = s.regs.as_ref().and_then(|r| read_u64(&r.vbar_el1))
        && pc.wrapping_sub(vbar) < 0x800
    {
        s.vector = Some(pc);
    }
    if el > 1 {
        // EL2 code ran (what `Counter::start` needs to know of it).
        s.counter.start(pc, el, Class::Plain, 0, false);
    }
    if let Some(f) = s.flags {
        qemu_plugin_u64_set(f.guest, vcpu, (el < 2) as u64);
    }
}

fn on_start(pc: u64, class: Class, word: u32) {
    let mut s = STATE.lock().unwrap();
    let (el, at_vector) = (s.el, s.vector == Some(pc));
    s.counter.start(pc, el, class, word, at_vector);
}

fn on_access(store: bool) {
    let mut s = STATE.lock().unwrap();
    if s.counter.is_open() {
        s.counter.access(store);
    }
}

fn write_results(s: &State) {
    let Some(path) = &s.out else { return };
    let mut text = String::new();
    for w in s.counter.windows() {
        let _ = w.write_line(&mut text);
    }
    for a in &s.counter.anomalies {
        text.push_str(&format!("anomaly {a}\n"));
    }
    for ((el, word), [n, r, w]) in s.counter.detail.iter().flatten() {
        text.push_str(&format!("insn {el} {word:08x} {n} {r} {w}\n"));
    }
    if s.more_vcpus {
        text.push_str("anomaly more than one vCPU: the oracle counts one\n");
    }
    if s.missing_regs || s.regs.is_none() {
        text.push_str("anomaly PSTATE could not be read\n");
    }
    if let Err(e) = std::fs::File::create(path).and_then(|mut f| f.write_all(text.as_bytes())) {
        eprintln!("mtex-oracle: cannot write {}: {e}", path.display());
    }
}

#[derive(Default)]
struct Oracle;

impl Register for Oracle {
    fn register(&mut self, id: PluginId, args: &Args, _info: &Info) -> qemu_plugin::Result<()> {
        let mut s = STATE.lock().unwrap();
        if let Some(Value::String(p)) = args.parsed.get("out") {
            s.out = Some(PathBuf::from(p));
        }
        if let Some(Value::Bool(true)) = args.parsed.get("detail") {
            s.counter.detail = Some(Default::default());
        }
        // SAFETY: QEMU's scoreboard API; the scoreboard lives as long as the plugin.
        let score = unsafe { qemu_plugin::sys::qemu_plugin_scoreboard_new(16) };
        s.flags = Some(Flags {
            open: qemu_plugin_u64 { score, offset: 0 },
            guest: qemu_plugin_u64 { score, offset: 8 },
        });
        drop(s);
        qemu_plugin_register_atexit_cb(id, |_| write_results(&STATE.lock().unwrap()))
    }
}

impl HasCallbacks for Oracle {
    fn on_vcpu_init(&mut self, _id: PluginId, vcpu: VCPUIndex) -> qemu_plugin::Result<()> {
        let mut s = STATE.lock().unwrap();
        s.more_vcpus |= vcpu > 0;
        if s.regs.is_none() {
            s.regs = Regs::find();
        }
        Ok(())
    }

    fn on_translation_block_translate(
        &mut self,
        _id: PluginId,
        tb: TranslationBlock,
    ) -> qemu_plugin::Result<()> {
        let Some(flags) = STATE.lock().unwrap().flags else {
            return Ok(());
        };
        let tb_pc = tb.vaddr();
        tb.register_conditional_execute_callback_flags(
            move |vcpu| on_block(vcpu, tb_pc),
            CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            qemu_plugin_cond::QEMU_PLUGIN_COND_NE,
            flags.open,
            0,
        );
        for insn in tb.instructions() {
            let data = insn.data();
            let Ok(word) = <[u8; 4]>::try_from(data.as_slice()).map(u32::from_le_bytes) else {
                continue;
            };
            let class = classify(word);
            let pc = insn.vaddr();
            if matches!(class, Class::OpenMarker | Class::CloseMarker) {
                let open = class == Class::OpenMarker;
                insn.register_execute_callback_flags(
                    move |vcpu| on_marker(vcpu, open),
                    CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                );
            }
            insn.register_conditional_execute_callback_flags(
                move |_| on_start(pc, class, word),
                CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
                qemu_plugin_cond::QEMU_PLUGIN_COND_NE,
                flags.guest,
                0,
            );
            if class.instrumented() {
                insn.register_memory_access_callback(
                    |_, info, _| on_access(info.is_store()),
                    MemRW::QEMU_PLUGIN_MEM_RW,
                );
            }
        }
        Ok(())
    }
}

register!(Oracle);
