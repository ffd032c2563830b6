//! A decoder for the A64 instructions that access data memory, plus the system instructions
//! MTE accounting needs (Arm ARM C4.1, "A64 instruction set encoding": Loads and Stores,
//! and System).
//!
//! Why not a general disassembler (disarm64, yaxpeax-arm)? They decode to mnemonics and
//! operand lists; the step handler needs, for the ~25 load/store encoding groups only, the
//! direction, the size, the base register and how the address is formed, at EL2, with no
//! allocation, on every stepped instruction. This file is that mapping and nothing else; it
//! is checked against binutils' assembler (tests/corpus.rs).

/// The direction(s) of a data access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
    /// An atomic read-modify-write (LSE atomics, SWP, CAS): one read and one write.
    ReadWrite,
}

/// What kind of memory instruction, as far as tag checking is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// An ordinary data access (loads, stores, pairs, exclusives, acquire/release, atomics,
    /// SIMD&FP, structures): subject to tag checking.
    Data,
    /// A load from a PC-relative literal: Unchecked.
    Literal,
    /// PRFM/PRFUM: no access, Unchecked.
    Prefetch,
    /// DC ZVA: zeroes a block of data; a Checked write.
    DcZva,
    /// DC GVA (tags only) and DC GZVA (tags and data): tag stores over a block, Unchecked.
    DcTagBlock { zero_data: bool },
    /// STG/STZG/ST2G/STZ2G/STGP: store allocation tags for `granules` 16-byte granules;
    /// Unchecked. With `data` they also write data, an Unchecked data write: STGP stores 16
    /// bytes, STZG and STZ2G zero the granules they tag.
    TagStore { granules: u8, data: bool },
    /// STGM/STZGM: store tags for a block (EL1 only). Unchecked. STZGM (`zero_data`) also
    /// zeroes the block's data: an Unchecked data write.
    TagStoreBlock { zero_data: bool },
    /// LDG/LDGM: load allocation tags. Unchecked.
    TagLoad,
}

/// How the address is formed from the base register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offset {
    /// `[Xn]`, `[Xn, #imm]`, `[Xn, #imm]!`: base + imm.
    Imm(i64),
    /// `[Xn], #imm` or `[Xn], Xm`: the access is at the base.
    PostIndex,
    /// `[Xn, Xm{, extend #amount}]`.
    Reg { m: u8, extend: Extend, shift: u8 },
}

/// Register-offset extension (the `option` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extend {
    Uxtw,
    Lsl,
    Sxtw,
    Sxtx,
}

/// The data key an authenticating load (LDRAA, LDRAB) checks its base register with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKey {
    A,
    B,
}

/// A memory-accessing instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemOp {
    pub kind: MemKind,
    pub dir: Dir,
    /// Bytes transferred (both registers of a pair; 0 for block operations, prefetches and
    /// tag-only accesses).
    pub size: u16,
    /// Base register number; 31 is SP (never XZR for an address). Literals use the PC.
    pub base: u8,
    pub offset: Offset,
    /// LDTR/STTR and friends: the access is made as if from EL0.
    pub unprivileged: bool,
    /// Pre- or post-index: the base register is written back.
    pub writeback: bool,
    /// A load- or store-exclusive (LDXR/STXR family), which single-stepping cannot carry
    /// through: every step's ERET clears the exclusive monitor.
    pub exclusive: bool,
    /// LDRAA/LDRAB: the base register holds a pointer signed with this key (and a zero
    /// modifier), which is authenticated before the offset is added. The access is at the
    /// authenticated address (`predicate::Controls::authenticated`), not at [`Self::address`].
    pub auth: Option<DataKey>,
    /// CAS/CASP: the register(s) compared with memory, which the instruction overwrites with
    /// what it read.
    pub compare: Option<Compare>,
}

/// The compare register(s) of a CAS or CASP. Both write what they read from memory into
/// them, whether the compare passed or not, so a register that changed (in the bits
/// compared) says the compare failed: then the Arm ARM permits the write to be Tag Unchecked,
/// and whether it writes at all is CONSTRAINED UNPREDICTABLE (D10.4.1, `MemAtomic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compare {
    /// Rs: for CASP the first of the even pair Rs, Rs+1. 31 is XZR, whose value is lost.
    pub rs: u8,
    /// Bits compared in each register: 8, 16, 32 or 64.
    pub bits: u8,
    /// CASP: Rs and Rs+1.
    pub pair: bool,
}

impl Compare {
    /// Whether the compare failed, from the register(s) before and after the instruction
    /// (`[Rs, Rs+1]`; the second is ignored unless a pair). None when Rs is XZR: the value
    /// read was discarded, so the outcome cannot be told.
    pub fn failed(&self, before: [u64; 2], after: [u64; 2]) -> Option<bool> {
        if self.rs == 31 {
            return None;
        }
        let mask = u64::MAX >> (64 - self.bits as u32);
        let differs = |i: usize| (before[i] ^ after[i]) & mask != 0;
        Some(differs(0) || (self.pair && differs(1)))
    }
}

impl MemOp {
    /// True for the SP-based forms the architecture leaves Unchecked (Arm ARM D10.4.1,
    /// RDRGYL: "base register only" or "base plus immediate offset"): SP as the base without
    /// writeback and without a register offset. Pre/post-indexed and register-offset
    /// SP-based accesses are checked (`tagchecked = wback || n != 31` in the pseudocode).
    pub fn sp_based(&self) -> bool {
        self.base == 31
            && !self.writeback
            && !matches!(self.offset, Offset::Reg { .. })
            && !matches!(self.kind, MemKind::Literal)
    }

    /// True when the architecture may Tag Check this access at all: an ordinary data access
    /// or DC ZVA, not SP-based. Everything else (literals, SP-based forms, prefetches, tag
    /// loads and stores) is Unchecked whatever the registers hold.
    pub fn form_checkable(&self) -> bool {
        matches!(self.kind, MemKind::Data | MemKind::DcZva) && !self.sp_based()
    }

    /// The virtual address accessed, given the general-purpose registers (x0..x30) and SP.
    /// For DC ZVA/GVA/GZVA the operand register holds the address (stored in `base`). For
    /// LDRAA/LDRAB this is the signed pointer plus the offset: see [`Self::auth`].
    pub fn address(&self, x: &[u64; 31], sp: u64) -> u64 {
        self.address_from(self.base_value(x, sp), x)
    }

    /// The base register's value (SP for register 31).
    pub fn base_value(&self, x: &[u64; 31], sp: u64) -> u64 {
        if self.base == 31 {
            sp
        } else {
            x[self.base as usize]
        }
    }

    /// The address accessed when the base is `base` (the offset, index or nothing added).
    pub fn address_from(&self, base: u64, x: &[u64; 31]) -> u64 {
        match self.offset {
            Offset::Imm(i) => base.wrapping_add(i as u64),
            Offset::PostIndex => base,
            Offset::Reg { m, extend, shift } => {
                let rm = if m == 31 { 0 } else { x[m as usize] };
                let ext = match extend {
                    Extend::Uxtw => rm as u32 as u64,
                    Extend::Sxtw => rm as u32 as i32 as i64 as u64,
                    Extend::Lsl | Extend::Sxtx => rm,
                };
                base.wrapping_add(ext << shift)
            }
        }
    }
}

/// A system-register access MTE accounting tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MteSysReg {
    SctlrEl1,
    TcrEl1,
    TfsrEl1,
    Tfsre0El1,
    GcrEl1,
    RgsrEl1,
}

/// Barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    Dsb,
    Dmb,
    Isb,
}

/// A decoded instruction, as far as mtex cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    Mem(MemOp),
    /// `MSR TCO, #imm`.
    MsrTcoImm(bool),
    /// `MSR TCO, Xt`.
    MsrTcoReg(u8),
    /// `MRS Xt, TCO`.
    MrsTco(u8),
    /// `MSR <reg>, Xt` / `MRS Xt, <reg>` for a register in [`MteSysReg`].
    SysRegWrite(MteSysReg, u8),
    SysRegRead(MteSysReg, u8),
    Barrier(Barrier),
    /// Encodings in the load/store space this decoder does not model (e.g. FEAT_MOPS
    /// CPY*/SET*, LD64B): reported, never silently counted as nothing.
    UnknownMem,
    /// Anything else: no data access.
    Other,
}

#[inline(always)]
fn bits(insn: u32, hi: u32, lo: u32) -> u32 {
    (insn >> lo) & ((1 << (hi - lo + 1)) - 1)
}

#[inline(always)]
fn sext(v: u32, width: u32) -> i64 {
    ((v as i64) << (64 - width)) >> (64 - width)
}

fn mem(kind: MemKind, dir: Dir, size: u16, base: u8, offset: Offset) -> Insn {
    Insn::Mem(MemOp {
        kind,
        dir,
        size,
        base,
        offset,
        unprivileged: false,
        writeback: false,
        exclusive: false,
        auth: None,
        compare: None,
    })
}

fn with_writeback(i: Insn, wb: bool) -> Insn {
    match i {
        Insn::Mem(m) => Insn::Mem(MemOp { writeback: wb, ..m }),
        other => other,
    }
}

/// True for instructions that cannot access memory, change PSTATE.TCO or the MTE controls,
/// change the exception level, or trap: data processing (immediate and register) and the
/// direct branches (B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ). The step engine's assembly fast path
/// retires these with a count only (hyp/src/fast_step.rs implements the same masks).
pub const fn is_inert(insn: u32) -> bool {
    insn & 0x1c00_0000 == 0x1000_0000 // data processing, immediate
        || insn & 0x0e00_0000 == 0x0a00_0000 // data processing, register
        || insn & 0x7c00_0000 == 0x1400_0000 // B, BL
        || insn & 0x7c00_0000 == 0x3400_0000 // CBZ, CBNZ, TBZ, TBNZ
        || (insn >> 24 == 0x54 && insn & 0x10 == 0) // B.cond
}

/// Decodes one instruction.
pub fn decode(insn: u32) -> Insn {
    // Loads and stores: op0 = x1x0 (bits 28:25 with bit 27 = 1, bit 25 = 0).
    if insn & 0x0a00_0000 == 0x0800_0000 {
        return decode_load_store(insn);
    }
    // System instructions: 1101 0101 00...
    if insn & 0xffc0_0000 == 0xd500_0000 {
        return decode_system(insn);
    }
    // SVE (op0 = 0010) memory groups (bit 31 set) and SME (bit 31 set, op0 = 0000) access
    // memory too: not modelled, so reported rather than passed as "no access".
    let op0 = bits(insn, 28, 25);
    if bits(insn, 31, 31) == 1 && (op0 == 0b0010 || op0 == 0b0000) {
        return Insn::UnknownMem;
    }
    Insn::Other
}

fn decode_system(insn: u32) -> Insn {
    // DSB <option>nXS (FEAT_XS): CRm = imm2:10, op2 = 001.
    if insn & 0xffff_f3ff == 0xd503_323f {
        return Insn::Barrier(Barrier::Dsb);
    }
    match insn & 0xffff_f0ff {
        0xd503_409f => return Insn::MsrTcoImm(bits(insn, 8, 8) != 0),
        // SSBB and PSSBB are the DSB encodings with CRm 0000 and 0100: speculation
        // barriers, not data synchronization barriers.
        0xd503_309f if matches!(bits(insn, 11, 8), 0b0000 | 0b0100) => return Insn::Other,
        0xd503_309f => return Insn::Barrier(Barrier::Dsb),
        0xd503_30bf => return Insn::Barrier(Barrier::Dmb),
        0xd503_30df => return Insn::Barrier(Barrier::Isb),
        _ => {}
    }
    let rt = bits(insn, 4, 0) as u8;
    // SYS/SYSL and MSR/MRS (register): 1101 0101 00 L 1 op0<0> op1 CRn CRm op2 Rt, with
    // op0 = 0b01 for SYS and 0b1x for MSR/MRS.
    let is_read = bits(insn, 21, 21) != 0;
    let op0 = bits(insn, 20, 19);
    let key = bits(insn, 20, 5); // op0<0>? no: op0, op1, CRn, CRm, op2
    if op0 == 0b01 && !is_read {
        // DC ZVA / GVA / GZVA: SYS #3, C7, C4, #op2 (Arm ARM C5.3).
        let zva = |kind| mem(kind, Dir::Write, 0, rt, Offset::Imm(0));
        return match key {
            k if k == sys_key(1, 3, 7, 4, 1) => zva(MemKind::DcZva),
            k if k == sys_key(1, 3, 7, 4, 3) => zva(MemKind::DcTagBlock { zero_data: false }),
            k if k == sys_key(1, 3, 7, 4, 4) => zva(MemKind::DcTagBlock { zero_data: true }),
            _ => Insn::Other,
        };
    }
    if op0 < 2 {
        return Insn::Other;
    }
    let reg = match key {
        k if k == sys_key(3, 3, 4, 2, 7) => {
            return if is_read {
                Insn::MrsTco(rt)
            } else {
                Insn::MsrTcoReg(rt)
            };
        }
        k if k == sys_key(3, 0, 1, 0, 0) => MteSysReg::SctlrEl1,
        k if k == sys_key(3, 0, 2, 0, 2) => MteSysReg::TcrEl1,
        k if k == sys_key(3, 0, 5, 6, 0) => MteSysReg::TfsrEl1,
        k if k == sys_key(3, 0, 5, 6, 1) => MteSysReg::Tfsre0El1,
        k if k == sys_key(3, 0, 1, 0, 6) => MteSysReg::GcrEl1,
        k if k == sys_key(3, 0, 1, 0, 5) => MteSysReg::RgsrEl1,
        _ => return Insn::Other,
    };
    if is_read {
        Insn::SysRegRead(reg, rt)
    } else {
        Insn::SysRegWrite(reg, rt)
    }
}

/// Bits 20:5 of an MSR/MRS/SYS encoding for (op0, op1, CRn, CRm, op2).
const fn sys_key(op0: u32, op1: u32, crn: u32, crm: u32, op2: u32) -> u32 {
    ((op0 & 3) << 14) | (op1 << 11) | (crn << 7) | (crm << 3) | op2
}

fn decode_load_store(insn: u32) -> Insn {
    let rt_n = bits(insn, 9, 5) as u8;
    let v = bits(insn, 26, 26) != 0;
    if bits(insn, 31, 24) == 0xd9 && bits(insn, 21, 21) == 1 {
        return decode_tags(insn, rt_n);
    }
    match bits(insn, 29, 27) {
        0b111 => decode_register(insn, v, rt_n),
        0b101 => decode_pair(insn, v, rt_n),
        0b011 => decode_literal_and_rcpc(insn, v, rt_n),
        0b001 => {
            if v {
                decode_simd_structures(insn, rt_n)
            } else if bits(insn, 25, 24) == 0b00 {
                decode_exclusive_ordered(insn, rt_n)
            } else {
                Insn::UnknownMem
            }
        }
        _ => Insn::UnknownMem,
    }
}

/// Bytes of a single register transfer: GPR 1 << size; SIMD&FP 16 when opc<1> is set.
fn reg_size(size: u32, v: bool, opc: u32) -> u16 {
    if v && opc & 2 != 0 { 16 } else { 1 << size }
}

/// LDR/STR (unsigned immediate, unscaled, pre/post-index, unprivileged, register offset),
/// LSE atomics, LDAPR, LDRAA/LDRAB.
fn decode_register(insn: u32, v: bool, n: u8) -> Insn {
    let size = bits(insn, 31, 30);
    let opc = bits(insn, 23, 22);
    let is_prefetch = !v && size == 3 && opc == 2;
    let dir = if opc == 0 || (v && opc == 2) {
        Dir::Write
    } else {
        Dir::Read
    };
    let bytes = reg_size(size, v, opc);
    let op = |offset| {
        if is_prefetch {
            mem(MemKind::Prefetch, Dir::Read, 0, n, offset)
        } else {
            mem(MemKind::Data, dir, bytes, n, offset)
        }
    };
    if bits(insn, 25, 24) == 0b01 {
        // Unsigned offset, scaled by the access size.
        let scale = if v { ((opc >> 1) << 2) | size } else { size };
        if v && opc & 2 != 0 && size != 0 {
            return Insn::UnknownMem;
        }
        return op(Offset::Imm((bits(insn, 21, 10) as i64) << scale));
    }
    if bits(insn, 25, 24) != 0b00 {
        return Insn::UnknownMem;
    }
    let imm9 = sext(bits(insn, 20, 12), 9);
    if bits(insn, 21, 21) == 0 {
        return match bits(insn, 11, 10) {
            0b00 => op(Offset::Imm(imm9)),
            0b01 if !is_prefetch => with_writeback(op(Offset::PostIndex), true),
            0b11 if !is_prefetch => with_writeback(op(Offset::Imm(imm9)), true),
            0b10 if !v && !is_prefetch => match op(Offset::Imm(imm9)) {
                Insn::Mem(mut m) => {
                    m.unprivileged = true;
                    Insn::Mem(m)
                }
                other => other,
            },
            _ => Insn::UnknownMem,
        };
    }
    match bits(insn, 11, 10) {
        0b10 => {
            let option = bits(insn, 15, 13);
            let extend = match option {
                0b010 => Extend::Uxtw,
                0b011 => Extend::Lsl,
                0b110 => Extend::Sxtw,
                0b111 => Extend::Sxtx,
                _ => return Insn::UnknownMem,
            };
            let scale = if v { ((opc >> 1) << 2) | size } else { size };
            let shift = if bits(insn, 12, 12) != 0 {
                scale as u8
            } else {
                0
            };
            op(Offset::Reg {
                m: bits(insn, 20, 16) as u8,
                extend,
                shift,
            })
        }
        0b00 if !v => {
            // Atomic memory operations: o3 (bit 15), opc (14:12).
            let o3 = bits(insn, 15, 15);
            let aop = bits(insn, 14, 12);
            match (o3, aop) {
                (0, _) | (1, 0b000) => {
                    mem(MemKind::Data, Dir::ReadWrite, 1 << size, n, Offset::Imm(0))
                }
                // LDAPR/LDAPRB/LDAPRH: A=1, R=0, Rs=11111.
                (1, 0b100) if bits(insn, 23, 22) == 0b10 && bits(insn, 20, 16) == 31 => {
                    mem(MemKind::Data, Dir::Read, 1 << size, n, Offset::Imm(0))
                }
                _ => Insn::UnknownMem,
            }
        }
        0b01 | 0b11 if !v && size == 3 => {
            // LDRAA/LDRAB: the offset is S:imm9, scaled by 8; W (bit 11) writes back; M
            // (bit 23) picks the key.
            let imm10 = (bits(insn, 22, 22) << 9) | bits(insn, 20, 12);
            let key = if bits(insn, 23, 23) == 0 {
                DataKey::A
            } else {
                DataKey::B
            };
            match mem(
                MemKind::Data,
                Dir::Read,
                8,
                n,
                Offset::Imm(sext(imm10, 10) << 3),
            ) {
                Insn::Mem(m) => Insn::Mem(MemOp {
                    writeback: bits(insn, 11, 11) != 0,
                    auth: Some(key),
                    ..m
                }),
                other => other,
            }
        }
        _ => Insn::UnknownMem,
    }
}

/// LDP/STP/LDNP/STNP/LDPSW/STGP.
fn decode_pair(insn: u32, v: bool, n: u8) -> Insn {
    let opc = bits(insn, 31, 30);
    let load = bits(insn, 22, 22) != 0;
    let index = bits(insn, 25, 23); // 000 no-allocate, 001 post, 010 offset, 011 pre
    if index > 0b011 {
        return Insn::UnknownMem;
    }
    let imm7 = sext(bits(insn, 21, 15), 7);
    let stgp = !v && opc == 0b01 && !load;
    let (scale, bytes) = match (v, opc) {
        (false, 0b00) => (2, 8),
        (false, 0b01) if stgp => (4, 16),
        (false, 0b01) => (2, 8), // LDPSW
        (false, 0b10) => (3, 16),
        (true, 0b00) => (2, 8),
        (true, 0b01) => (3, 16),
        (true, 0b10) => (4, 32),
        _ => return Insn::UnknownMem,
    };
    if stgp && index == 0b000 {
        return Insn::UnknownMem;
    }
    let offset = if index == 0b001 {
        Offset::PostIndex
    } else {
        Offset::Imm(imm7 << scale)
    };
    let wb = index == 0b001 || index == 0b011;
    if stgp {
        let op = mem(
            MemKind::TagStore {
                granules: 1,
                data: true,
            },
            Dir::Write,
            bytes,
            n,
            offset,
        );
        return with_writeback(op, wb);
    }
    let dir = if load { Dir::Read } else { Dir::Write };
    with_writeback(mem(MemKind::Data, dir, bytes, n, offset), wb)
}

/// LDR (literal), PRFM (literal), and the RCpc unscaled forms (LDAPUR/STLUR).
fn decode_literal_and_rcpc(insn: u32, v: bool, rt_n: u8) -> Insn {
    match bits(insn, 25, 24) {
        0b00 => {
            let opc = bits(insn, 31, 30);
            let offset = Offset::Imm(sext(bits(insn, 23, 5), 19) << 2);
            match (v, opc) {
                (false, 0b11) => mem(MemKind::Prefetch, Dir::Read, 0, 31, offset),
                (false, 0b00) => mem(MemKind::Literal, Dir::Read, 4, 31, offset),
                (false, 0b01) => mem(MemKind::Literal, Dir::Read, 8, 31, offset),
                (false, 0b10) => mem(MemKind::Literal, Dir::Read, 4, 31, offset), // LDRSW
                (true, 0b11) => Insn::UnknownMem,
                (true, o) => mem(MemKind::Literal, Dir::Read, 4 << o, 31, offset),
                _ => Insn::UnknownMem,
            }
        }
        0b01 if !v && bits(insn, 21, 21) == 0 && bits(insn, 11, 10) == 0b00 => {
            let size = bits(insn, 31, 30);
            let opc = bits(insn, 23, 22);
            let dir = if opc == 0 { Dir::Write } else { Dir::Read };
            mem(
                MemKind::Data,
                dir,
                1 << size,
                rt_n,
                Offset::Imm(sext(bits(insn, 20, 12), 9)),
            )
        }
        _ => Insn::UnknownMem,
    }
}

/// LDXR/STXR/LDAXR/STLXR, LDXP/STXP, LDAR/STLR/LDLAR/STLLR, CAS, CASP.
fn decode_exclusive_ordered(insn: u32, n: u8) -> Insn {
    let size = bits(insn, 31, 30);
    let o2 = bits(insn, 23, 23);
    let load = bits(insn, 22, 22) != 0;
    let o1 = bits(insn, 21, 21);
    let rs = bits(insn, 20, 16) as u8;
    let rw = if load { Dir::Read } else { Dir::Write };
    let at = Offset::Imm(0);
    let exclusive = |i: Insn| match i {
        Insn::Mem(m) => Insn::Mem(MemOp {
            exclusive: true,
            ..m
        }),
        other => other,
    };
    match (o2, o1) {
        (0, 0) => exclusive(mem(MemKind::Data, rw, 1 << size, n, at)),
        (0, 1) if size >= 2 => exclusive(mem(MemKind::Data, rw, 2 << size, n, at)), // LDXP/STXP
        (0, 1) => compares(
            mem(MemKind::Data, Dir::ReadWrite, 8 << size, n, at), // CASP (size 0x)
            Compare {
                rs,
                bits: 32 << size,
                pair: true,
            },
        ),
        (1, 0) => mem(MemKind::Data, rw, 1 << size, n, at), // LDAR/STLR
        _ => compares(
            mem(MemKind::Data, Dir::ReadWrite, 1 << size, n, at), // CAS
            Compare {
                rs,
                bits: 8 << size,
                pair: false,
            },
        ),
    }
}

fn compares(i: Insn, c: Compare) -> Insn {
    match i {
        Insn::Mem(m) => Insn::Mem(MemOp {
            compare: Some(c),
            ..m
        }),
        other => other,
    }
}

/// LD1-LD4/ST1-ST4 (multiple and single structures, with and without post-index).
fn decode_simd_structures(insn: u32, n: u8) -> Insn {
    if bits(insn, 31, 31) != 0 || bits(insn, 29, 24) != 0b001100 && bits(insn, 29, 24) != 0b001101 {
        return Insn::UnknownMem;
    }
    let q = bits(insn, 30, 30);
    let load = bits(insn, 22, 22) != 0;
    let post = bits(insn, 23, 23) != 0;
    let single = bits(insn, 24, 24) != 0;
    let opcode = bits(insn, 15, 12);
    let size = bits(insn, 11, 10);
    let bytes = if !single {
        let regs = match opcode {
            0b0000 | 0b0010 => 4,
            0b0100 | 0b0110 => 3,
            0b0111 => 1,
            0b1000 | 0b1010 => 2,
            _ => return Insn::UnknownMem,
        };
        regs * if q != 0 { 16 } else { 8 }
    } else {
        let selem = ((bits(insn, 13, 13) << 1) | bits(insn, 21, 21)) + 1;
        let esize = match opcode >> 1 {
            0b000 | 0b001 => 1,
            0b010 | 0b011 => 2,
            0b100 | 0b101 => {
                if size & 1 != 0 {
                    8
                } else {
                    4
                }
            }
            _ => 1 << size, // LDnR: replicate
        };
        selem * esize
    };
    let offset = if post {
        Offset::PostIndex
    } else {
        Offset::Imm(0)
    };
    let dir = if load { Dir::Read } else { Dir::Write };
    with_writeback(mem(MemKind::Data, dir, bytes as u16, n, offset), post)
}

/// STG/STZG/ST2G/STZ2G (post, offset, pre), LDG, STGM/STZGM/LDGM.
fn decode_tags(insn: u32, n: u8) -> Insn {
    let opc = bits(insn, 23, 22);
    let op2 = bits(insn, 11, 10);
    let imm = sext(bits(insn, 20, 12), 9) << 4;
    if op2 == 0b00 {
        return match opc {
            0b01 => mem(MemKind::TagLoad, Dir::Read, 0, n, Offset::Imm(imm)),
            0b11 => mem(MemKind::TagLoad, Dir::Read, 0, n, Offset::Imm(0)),
            // STZGM (opc 00) zeroes the block's data as well; STGM (opc 10) does not.
            zero => mem(
                MemKind::TagStoreBlock {
                    zero_data: zero == 0b00,
                },
                Dir::Write,
                0,
                n,
                Offset::Imm(0),
            ),
        };
    }
    let granules = if opc & 2 != 0 { 2 } else { 1 };
    let offset = if op2 == 0b01 {
        Offset::PostIndex
    } else {
        Offset::Imm(imm)
    };
    with_writeback(
        mem(
            // STZG (opc 01) and STZ2G (opc 11) zero the data of the granules they tag.
            MemKind::TagStore {
                granules,
                data: opc & 1 != 0,
            },
            Dir::Write,
            0,
            n,
            offset,
        ),
        op2 != 0b10,
    )
}

/// How an instruction moves between functions, for call stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// BL, BLR, BLRAA, BLRAB, BLRAAZ, BLRABZ: writes the return address to x30.
    Call,
    /// RET, RETAA, RETAB.
    Return,
    /// BR, BRAA, BRAB, BRAAZ, BRABZ: an indirect branch that is not a call (a jump, a tail
    /// call, or a return by another name: `br x30`).
    Jump,
    /// ERET, ERETAA, ERETAB.
    ExceptionReturn,
    Other,
}

/// Classifies `insn` for call stacks. Encodings that are UNDEFINED within a class (a reserved
/// op3 or op4) are classed with it: they cannot complete, so they never reach a stack.
pub const fn flow(insn: u32) -> Flow {
    if insn & 0xfc00_0000 == 0x9400_0000 {
        return Flow::Call;
    }
    // Unconditional branch (register): 1101011 opc(24:21) 11111 op3 Rn op4.
    if insn & 0xfe1f_0000 == 0xd61f_0000 {
        return match (insn >> 21) & 0xf {
            0b0001 | 0b1001 => Flow::Call,
            0b0000 | 0b1000 => Flow::Jump,
            0b0010 => Flow::Return,
            0b0100 => Flow::ExceptionReturn,
            _ => Flow::Other,
        };
    }
    Flow::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_returns_and_exception_returns() {
        // bl .; blr x3; blraa x3, x4; blraaz x3; blrabz x3
        for w in [
            0x9400_0000,
            0x97ff_ffff,
            0xd63f_0060,
            0xd73f_0864,
            0xd63f_087f,
            0xd63f_0c7f,
        ] {
            assert_eq!(flow(w), Flow::Call, "{w:#x}");
        }
        // ret; ret x5; retaa; retab
        for w in [0xd65f_03c0, 0xd65f_00a0, 0xd65f_0bff, 0xd65f_0fff] {
            assert_eq!(flow(w), Flow::Return, "{w:#x}");
        }
        // eret; eretaa; eretab
        for w in [0xd69f_03e0, 0xd69f_0bff, 0xd69f_0fff] {
            assert_eq!(flow(w), Flow::ExceptionReturn, "{w:#x}");
        }
        // br x16; br x30; braaz x16; brabz x16; braa x16, x17; brab x30, sp
        for w in [
            0xd61f_0200,
            0xd61f_03c0,
            0xd61f_0a1f,
            0xd61f_0e1f,
            0xd71f_0a11,
            0xd71f_0fdf,
        ] {
            assert_eq!(flow(w), Flow::Jump, "{w:#x}");
        }
        // b .; cbz; svc #0; nop; drps
        for w in [
            0x1400_0000,
            0xb400_0000,
            0xd400_0001,
            0xd503_201f,
            0xd6bf_03e0,
        ] {
            assert_eq!(flow(w), Flow::Other, "{w:#x}");
        }
    }

    proptest::proptest! {
        /// What the fast path retires without decoding is never anything the decoder cares
        /// about.
        #[test]
        fn inert_instructions_decode_to_other(w: u32) {
            if is_inert(w) {
                proptest::prop_assert_eq!(decode(w), Insn::Other);
            }
        }
    }

    #[test]
    fn inert_examples() {
        // add x1, x2, x3; movz x0, #2; subs x10, x10, #1; b.ne .-8; b .; cbz x1, .; tbz w1, #3, .
        for w in [
            0x8b03_0041u32,
            0xd280_0040,
            0xf100_054a,
            0x54ff_ffc1,
            0x1400_0000,
            0xb400_0001,
            0x3618_0001,
        ] {
            assert!(is_inert(w), "{w:#x}");
        }
        // ldr x1, [x2]; hvc #0; msr tco, #1; eret; ret; svc #0
        for w in [
            0xf940_0041u32,
            0xd400_0002,
            0xd503_419f,
            0xd69f_03e0,
            0xd65f_03c0,
            0xd400_0001,
        ] {
            assert!(!is_inert(w), "{w:#x}");
        }
    }

    #[test]
    fn cas_and_casp_name_their_compare_registers() {
        // cas x1, x2, [x3]; casb w1, w2, [x3]; casp x4, x5, x6, x7, [x8]; casp w4, w5, w6, w7, [x8]
        let compare = |w: u32| match decode(w) {
            Insn::Mem(m) => m.compare,
            other => panic!("{w:#x}: {other:?}"),
        };
        let c = |rs, bits, pair| Some(Compare { rs, bits, pair });
        assert_eq!(compare(0xc8a1_7c62), c(1, 64, false));
        assert_eq!(compare(0x08a1_7c62), c(1, 8, false));
        assert_eq!(compare(0x4824_7d06), c(4, 64, true));
        assert_eq!(compare(0x0824_7d06), c(4, 32, true));
        // ldxr x1, [x2]; ldadd x1, x2, [x3]: no compare.
        assert_eq!(compare(0xc85f_7c41), None);
        assert_eq!(compare(0xf821_0062), None);
    }

    #[test]
    fn a_compare_failed_when_its_register_changed_in_the_bits_compared() {
        let cas = Compare {
            rs: 1,
            bits: 32,
            pair: false,
        };
        // Passed: Ws holds the value read, which equalled it (Xs's upper half is not compared).
        assert_eq!(cas.failed([0xffff_0000_0000_0007, 0], [7, 0]), Some(false));
        assert_eq!(cas.failed([7, 0], [8, 0]), Some(true));
        let casp = Compare {
            rs: 2,
            bits: 64,
            pair: true,
        };
        assert_eq!(casp.failed([1, 2], [1, 2]), Some(false));
        assert_eq!(casp.failed([1, 2], [1, 3]), Some(true));
        // The second register of a single CAS is not looked at; XZR cannot be told.
        assert_eq!(cas.failed([7, 1], [7, 2]), Some(false));
        assert_eq!(Compare { rs: 31, ..cas }.failed([0, 0], [0, 0]), None);
    }

    #[test]
    fn tco_encodings_from_design_notes() {
        assert_eq!(decode(0xd503_409f), Insn::MsrTcoImm(false));
        assert_eq!(decode(0xd503_419f), Insn::MsrTcoImm(true));
        assert_eq!(decode(0xd51b_42e0 | 5), Insn::MsrTcoReg(5));
        assert_eq!(decode(0xd53b_42e0 | 7), Insn::MrsTco(7));
    }

    #[test]
    fn address_forms() {
        let mut x = [0u64; 31];
        x[1] = 0x1000;
        x[2] = (-2i64) as u64;
        let m = MemOp {
            kind: MemKind::Data,
            dir: Dir::Read,
            size: 8,
            base: 1,
            offset: Offset::Reg {
                m: 2,
                extend: Extend::Sxtw,
                shift: 3,
            },
            unprivileged: false,
            writeback: false,
            exclusive: false,
            auth: None,
            compare: None,
        };
        assert_eq!(m.address(&x, 0), 0x1000 - 16);
        let sp = MemOp {
            base: 31,
            offset: Offset::Imm(8),
            ..m
        };
        assert_eq!(sp.address(&x, 0x8000), 0x8008);
        assert!(sp.sp_based());
        assert!(
            !MemOp {
                writeback: true,
                ..sp
            }
            .sp_based(),
            "pre-index with SP is checked"
        );
        assert!(
            !MemOp { base: 31, ..m }.sp_based(),
            "register offset with SP is checked"
        );
    }
}
