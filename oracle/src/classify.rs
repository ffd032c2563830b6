//! What the oracle needs to know of an instruction, from its encoding alone. Written here on
//! purpose rather than taken from `mtex-trace`'s decoder: the oracle checks the trace, so it
//! shares none of its judgement, only these few encodings, each from the Arm ARM (C4.1).

use mtex_abi::oracle::{CLOSE_MARKER, OPEN_MARKER, SHARE_CLOSE_MARKER, SHARE_OPEN_MARKER};

/// How the oracle treats an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The hypervisor's marker opening a traced phase (at EL2 only).
    OpenMarker,
    /// The hypervisor's marker closing a traced phase (at EL2 only).
    CloseMarker,
    /// The hypervisor's marker starting a CPU's sampled share of a window (at EL2 only).
    ShareOpenMarker,
    /// The hypervisor's marker ending a CPU's sampled share of a window (at EL2 only).
    ShareCloseMarker,
    /// An MTE tag instruction with no data access (STG, ST2G, LDG, STGM, LDGM, DC GVA).
    /// Never given a memory callback: in QEMU 10.0 an instruction with one loses its tag
    /// accesses (cputlb's `probe_access` returns TLB_MMIO for it, so tags are neither stored
    /// nor loaded nor checked).
    TagOnly,
    /// A tag store that also zeroes the data it tags (STZG, STZ2G, STZGM, DC GZVA): a write
    /// the trace counts. Not instrumented (as above); its write is counted when it executes.
    TagZeroing,
    /// STGP: tags, and 16 bytes of data the trace counts as a write. Not instrumented (as
    /// above); its write is counted when it executes.
    Stgp,
    /// DC ZVA: a write the trace counts, which QEMU makes in a helper with no memory callback.
    /// Counted when it executes.
    DcZva,
    /// A store-exclusive: QEMU implements it as a compare-and-exchange, a read and a write
    /// for the plugin; the architecture, and the trace, see only the write.
    StoreExclusive,
    /// CASP/CASPA/CASPL/CASPAL: a read and a write for the architecture and the trace, but in
    /// QEMU 10.0 only its write callback fires for the 64-bit-register form (its 128-bit
    /// compare-and-exchange loads through `tcg_gen_qemu_ld_i128_int`; measured: no read
    /// callback for 73 of 73 in a futex-hash window). Its read is counted with its write.
    CasPair,
    /// Anything else: its memory callbacks say what it accessed.
    Plain,
}

impl Class {
    /// Whether the instruction gets memory callbacks.
    pub fn instrumented(self) -> bool {
        !matches!(
            self,
            Class::TagOnly | Class::TagZeroing | Class::Stgp | Class::DcZva
        )
    }

    /// A write counted when the instruction executes, not from a callback.
    pub fn write_on_execute(self) -> bool {
        matches!(self, Class::Stgp | Class::DcZva | Class::TagZeroing)
    }
}

/// DC <op>, Xt is SYS #op1, C7, Cm, #op2, Xt: these are the words with Rt = 0.
const DC_ZVA: u32 = 0xd50b_7420;
const DC_GVA: u32 = 0xd50b_7460;
const DC_GZVA: u32 = 0xd50b_7480;

pub fn classify(word: u32) -> Class {
    match word {
        OPEN_MARKER => return Class::OpenMarker,
        CLOSE_MARKER => return Class::CloseMarker,
        SHARE_OPEN_MARKER => return Class::ShareOpenMarker,
        SHARE_CLOSE_MARKER => return Class::ShareCloseMarker,
        _ => {}
    }
    // STG/STZG/ST2G/STZ2G/LDG/STGM/STZGM/LDGM: 1101 1001 xx1 (C4.1.88 "Load/store memory
    // tags").
    // opc (23:22) and op2 (11:10): STZG is opc 01, STZ2G opc 11 (op2 not 00), STZGM opc 00
    // with op2 00; they zero the data they tag.
    if word & 0xff20_0000 == 0xd920_0000 {
        let (opc, op2) = ((word >> 22) & 3, (word >> 10) & 3);
        let zeroing = if op2 == 0 { opc == 0b00 } else { opc & 1 == 1 };
        return if zeroing {
            Class::TagZeroing
        } else {
            Class::TagOnly
        };
    }
    // STGP: 0110 100 V=0 opc(3) L=0, post-index (001), signed offset (010), pre-index (011).
    if matches!(word & 0xffc0_0000, 0x6880_0000 | 0x6900_0000 | 0x6980_0000) {
        return Class::Stgp;
    }
    match word & !0x1f {
        DC_ZVA => return Class::DcZva,
        DC_GVA => return Class::TagOnly,
        DC_GZVA => return Class::TagZeroing,
        _ => {}
    }
    // CASP: 0 sz 001000 0 L 1 Rs o0 11111 Rn Rt (CAS has bit 23 set; STXP, in the same
    // space, bit 31), so before the store-exclusives.
    if word & 0xbfa0_7c00 == 0x0820_7c00 {
        return Class::CasPair;
    }
    // Load/store exclusive: size 001000 o2 L o1 Rs o0 Rt2 Rn Rt; a store-exclusive has
    // o2 = 0 and L = 0 (o1 selects the pair form, o0 release).
    if word & 0x3fc0_0000 == 0x0800_0000 {
        return Class::StoreExclusive;
    }
    Class::Plain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_from_the_assembler() {
        // Words as GNU as assembles them.
        let cases = [
            (0xd9200820, Class::TagOnly),          // stg x0, [x1]
            (0xd9600820, Class::TagZeroing),       // stzg x0, [x1]
            (0xd9a00820, Class::TagOnly),          // st2g x0, [x1]
            (0xd9e00820, Class::TagZeroing),       // stz2g x0, [x1]
            (0xd9600020, Class::TagOnly),          // ldg x0, [x1]
            (0xd9a00020, Class::TagOnly),          // stgm x0, [x1]
            (0xd9200020, Class::TagZeroing),       // stzgm x0, [x1]
            (0xd9e00020, Class::TagOnly),          // ldgm x0, [x1]
            (0x69000440, Class::Stgp),             // stgp x0, x1, [x2]
            (0x68800440, Class::Stgp),             // stgp x0, x1, [x2], #0
            (0x69800440, Class::Stgp),             // stgp x0, x1, [x2, #0]!
            (0xd50b7423, Class::DcZva),            // dc zva, x3
            (0xd50b7463, Class::TagOnly),          // dc gva, x3
            (0xd50b7483, Class::TagZeroing),       // dc gzva, x3
            (0xd50b7e23, Class::Plain),            // dc civac, x3
            (0xc8027c20, Class::StoreExclusive),   // stxr w2, x0, [x1]
            (0x8802fc20, Class::StoreExclusive),   // stlxr w2, w0, [x1]
            (0xc8220c20, Class::StoreExclusive),   // stxp w2, x0, x3, [x1]
            (0xc85f7c20, Class::Plain),            // ldxr x0, [x1]
            (0xc8dffc20, Class::Plain),            // ldar x0, [x1]
            (0xc89ffc20, Class::Plain),            // stlr x0, [x1]
            (0xc8a07c41, Class::Plain),            // cas x0, x1, [x2]
            (0x48207c82, Class::CasPair),          // casp x0, x1, x2, x3, [x4]
            (0x48607c82, Class::CasPair),          // caspa x0, x1, x2, x3, [x4]
            (0x0820fc82, Class::CasPair),          // caspl w0, w1, w2, w3, [x4]
            (0x88a07c41, Class::Plain),            // cas w0, w1, [x2]
            (0xa9400420, Class::Plain),            // ldp x0, x1, [x1]
            (0xa9000420, Class::Plain),            // stp x0, x1, [x1]
            (0xd503201f, Class::Plain),            // nop
            (0xaa0003ff, Class::OpenMarker),       // orr xzr, xzr, x0
            (0xaa0103ff, Class::CloseMarker),      // orr xzr, xzr, x1
            (0xaa0203ff, Class::Plain),            // orr xzr, xzr, x2
            (0xaa0303ff, Class::ShareOpenMarker),  // orr xzr, xzr, x3
            (0xaa0403ff, Class::ShareCloseMarker), // orr xzr, xzr, x4
            (0xaa0503ff, Class::Plain),            // orr xzr, xzr, x5
        ];
        for (word, class) in cases {
            assert_eq!(classify(word), class, "{word:#010x}");
        }
    }

    #[test]
    fn only_untouchable_instructions_go_uninstrumented() {
        assert!(!Class::TagOnly.instrumented());
        assert!(!Class::Stgp.instrumented() && Class::Stgp.write_on_execute());
        assert!(!Class::DcZva.instrumented() && Class::DcZva.write_on_execute());
        assert!(!Class::TagZeroing.instrumented() && Class::TagZeroing.write_on_execute());
        assert!(!Class::TagOnly.write_on_execute());
        assert!(Class::StoreExclusive.instrumented() && Class::Plain.instrumented());
        assert!(Class::CasPair.instrumented());
    }
}
