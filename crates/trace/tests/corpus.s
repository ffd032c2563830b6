# The decoder's corpus: one instruction per line, assembled by binutils (aarch64-linux-gnu-as),
# then decoded; the expectation after "//" is what the Arm ARM says the instruction does:
#   <kind> <dir> <bytes> <address form> base:<n> [unpriv] [wb] [excl]   for memory instructions
# (wb: pre/post-index writeback, which makes an SP-based access checked; excl: exclusive)
# kinds: data literal prefetch zva gva gzva tagstore<granules> tagblock tagload
# (+data: a tag store that also writes data: STGP stores it, STZG/STZ2G/STZGM zero it)
# forms: imm:<offset>  post  reg:<m>:<extend>:<shift>      (base 31 is SP; literals use the PC)
# --- general-purpose loads and stores, immediate forms
ldr x1, [x2]                       // data r 8 imm:0 base:2
ldr x1, [x2, #8]                   // data r 8 imm:8 base:2
ldr w1, [x2, #4]                   // data r 4 imm:4 base:2
ldrb w1, [x2, #1]                  // data r 1 imm:1 base:2
ldrh w1, [x2, #2]                  // data r 2 imm:2 base:2
ldrsw x1, [x2, #4]                 // data r 4 imm:4 base:2
ldrsb x1, [x2]                     // data r 1 imm:0 base:2
ldrsh w1, [x2, #6]                 // data r 2 imm:6 base:2
str x1, [x2, #16]                  // data w 8 imm:16 base:2
strb w1, [x2]                      // data w 1 imm:0 base:2
strh w1, [x2, #4094]               // data w 2 imm:4094 base:2
ldr x1, [sp, #8]                   // data r 8 imm:8 base:31
ldur x1, [x2, #-8]                 // data r 8 imm:-8 base:2
stur w1, [x2, #3]                  // data w 4 imm:3 base:2
ldr x1, [x2, #16]!                 // data r 8 imm:16 base:2 wb
ldr x1, [x2], #16                  // data r 8 post base:2 wb
str x1, [x2, #-16]!                // data w 8 imm:-16 base:2 wb
str x1, [x2], #-16                 // data w 8 post base:2 wb
# --- unprivileged
ldtr x1, [x2, #8]                  // data r 8 imm:8 base:2 unpriv
sttr w1, [x2]                      // data w 4 imm:0 base:2 unpriv
ldtrb w1, [x2]                     // data r 1 imm:0 base:2 unpriv
ldtrsw x1, [x2, #-4]               // data r 4 imm:-4 base:2 unpriv
# --- register offset
ldr x1, [x2, x3]                   // data r 8 reg:3:lsl:0 base:2
ldr x1, [x2, x3, lsl #3]           // data r 8 reg:3:lsl:3 base:2
ldr w1, [x2, w3, sxtw #2]          // data r 4 reg:3:sxtw:2 base:2
str x1, [x2, w3, uxtw]             // data w 8 reg:3:uxtw:0 base:2
ldrb w1, [x2, x3, sxtx]            // data r 1 reg:3:sxtx:0 base:2
ldr x1, [sp, x3]                   // data r 8 reg:3:lsl:0 base:31
# --- prefetch
prfm pldl1keep, [x2]               // prefetch r 0 imm:0 base:2
prfm pstl2strm, [x2, x3]           // prefetch r 0 reg:3:lsl:0 base:2
prfum pldl1keep, [x2, #1]          // prefetch r 0 imm:1 base:2
prfm pldl1keep, .+16               // prefetch r 0 imm:16 base:31
# --- literal loads
ldr x1, .+8                        // literal r 8 imm:8 base:31
ldr w1, .-4                        // literal r 4 imm:-4 base:31
ldrsw x1, .+12                     // literal r 4 imm:12 base:31
ldr q1, .+32                       // literal r 16 imm:32 base:31
ldr d1, .+4                        // literal r 8 imm:4 base:31
ldr s1, .+4                        // literal r 4 imm:4 base:31
# --- SIMD&FP single registers
ldr q1, [x2, #16]                  // data r 16 imm:16 base:2
str d1, [x2, #8]                   // data w 8 imm:8 base:2
ldr s1, [x2, #4]                   // data r 4 imm:4 base:2
ldr b1, [x2, #1]                   // data r 1 imm:1 base:2
ldr h1, [x2, #2]                   // data r 2 imm:2 base:2
ldur q1, [x2, #-16]                // data r 16 imm:-16 base:2
str q1, [x2, #32]!                 // data w 16 imm:32 base:2 wb
ldr q1, [x2, x3, lsl #4]           // data r 16 reg:3:lsl:4 base:2
# --- pairs
ldp x1, x3, [x2]                   // data r 16 imm:0 base:2
ldp x1, x3, [x2, #16]              // data r 16 imm:16 base:2
stp x1, x3, [x2, #-16]!            // data w 16 imm:-16 base:2 wb
ldp x1, x3, [x2], #32              // data r 16 post base:2 wb
ldp w1, w3, [x2, #8]               // data r 8 imm:8 base:2
ldpsw x1, x3, [x2, #8]             // data r 8 imm:8 base:2
ldnp x1, x3, [x2, #16]             // data r 16 imm:16 base:2
stnp w1, w3, [x2]                  // data w 8 imm:0 base:2
stp x29, x30, [sp, #-16]!          // data w 16 imm:-16 base:31 wb
ldp q1, q3, [x2, #32]              // data r 32 imm:32 base:2
stp d1, d3, [x2, #16]              // data w 16 imm:16 base:2
ldp s1, s3, [x2, #8]               // data r 8 imm:8 base:2
# --- exclusives, acquire/release
ldxr x1, [x2]                      // data r 8 imm:0 base:2 excl
stxr w4, x1, [x2]                  // data w 8 imm:0 base:2 excl
ldaxr w1, [x2]                     // data r 4 imm:0 base:2 excl
stlxr w4, w1, [x2]                 // data w 4 imm:0 base:2 excl
ldxrb w1, [x2]                     // data r 1 imm:0 base:2 excl
ldxp x1, x3, [x2]                  // data r 16 imm:0 base:2 excl
stxp w4, w1, w3, [x2]              // data w 8 imm:0 base:2 excl
ldar x1, [x2]                      // data r 8 imm:0 base:2
stlr w1, [x2]                      // data w 4 imm:0 base:2
ldarb w1, [x2]                     // data r 1 imm:0 base:2
ldlar x1, [x2]                     // data r 8 imm:0 base:2
ldapr x1, [x2]                     // data r 8 imm:0 base:2
ldaprb w1, [x2]                    // data r 1 imm:0 base:2
ldapur x1, [x2, #-8]               // data r 8 imm:-8 base:2
stlur w1, [x2, #4]                 // data w 4 imm:4 base:2
# --- LSE atomics: one read and one write
ldadd x1, x3, [x2]                 // data rw 8 imm:0 base:2
ldaddal w1, w3, [x2]               // data rw 4 imm:0 base:2
stadd x1, [x2]                     // data rw 8 imm:0 base:2
swp x1, x3, [x2]                   // data rw 8 imm:0 base:2
swpb w1, w3, [x2]                  // data rw 1 imm:0 base:2
ldsetl x1, x3, [x2]                // data rw 8 imm:0 base:2
ldclrah w1, w3, [x2]               // data rw 2 imm:0 base:2
ldumax x1, x3, [sp]                // data rw 8 imm:0 base:31
cas x1, x3, [x2]                   // data rw 8 imm:0 base:2
casal w1, w3, [x2]                 // data rw 4 imm:0 base:2
casb w1, w3, [x2]                  // data rw 1 imm:0 base:2
casp x0, x1, x4, x5, [x2]          // data rw 16 imm:0 base:2
casp w0, w1, w4, w5, [x2]          // data rw 8 imm:0 base:2
# --- SIMD structures
ld1 {v0.16b}, [x2]                 // data r 16 imm:0 base:2
ld1 {v0.8b}, [x2]                  // data r 8 imm:0 base:2
ld1 {v0.16b, v1.16b}, [x2]         // data r 32 imm:0 base:2
ld4 {v0.4s, v1.4s, v2.4s, v3.4s}, [x2] // data r 64 imm:0 base:2
st2 {v0.2d, v1.2d}, [x2], #32      // data w 32 post base:2 wb
st1 {v0.16b, v1.16b, v2.16b}, [x2], x3 // data w 48 post base:2 wb
ld1 {v0.s}[1], [x2]                // data r 4 imm:0 base:2
ld3 {v0.h, v1.h, v2.h}[2], [x2]    // data r 6 imm:0 base:2
st1 {v0.d}[1], [x2], #8            // data w 8 post base:2 wb
ld1r {v0.4s}, [x2]                 // data r 4 imm:0 base:2
ld4r {v0.2d, v1.2d, v2.2d, v3.2d}, [x2] // data r 32 imm:0 base:2
ld1 {v0.16b}, [sp]                 // data r 16 imm:0 base:31
# --- pointer-authenticated loads
ldraa x1, [x2, #8]                 // data r 8 imm:8 base:2 auth:a
ldrab x1, [x2, #-8]!               // data r 8 imm:-8 base:2 wb auth:b
ldraa x3, [sp, #-4096]!            // data r 8 imm:-4096 base:31 wb auth:a
ldrab x4, [x5, #4088]              // data r 8 imm:4088 base:5 auth:b
# --- MTE tag instructions
stg x1, [x2]                       // tagstore1 w 0 imm:0 base:2
stg x1, [x2, #16]                  // tagstore1 w 0 imm:16 base:2
stg x1, [x2], #32                  // tagstore1 w 0 post base:2 wb
stg x1, [x2, #-16]!                // tagstore1 w 0 imm:-16 base:2 wb
stzg x1, [x2]                      // tagstore1+data w 0 imm:0 base:2
st2g x1, [x2, #32]                 // tagstore2 w 0 imm:32 base:2
stz2g x1, [x2]                     // tagstore2+data w 0 imm:0 base:2
stgp x1, x3, [x2]                  // tagstore1+data w 16 imm:0 base:2
stgp x1, x3, [x2, #32]             // tagstore1+data w 16 imm:32 base:2
stgp x1, x3, [x2], #-16            // tagstore1+data w 16 post base:2 wb
ldg x1, [x2]                       // tagload r 0 imm:0 base:2
ldg x1, [x2, #16]                  // tagload r 0 imm:16 base:2
stgm x1, [x2]                      // tagblock w 0 imm:0 base:2
stzgm x1, [x2]                     // tagblock+data w 0 imm:0 base:2
ldgm x1, [x2]                      // tagload r 0 imm:0 base:2
# --- cache operations
dc zva, x3                         // zva w 0 imm:0 base:3
dc gva, x3                         // gva w 0 imm:0 base:3
dc gzva, x3                        // gzva w 0 imm:0 base:3
dc civac, x3                       // other
dc cvac, x3                        // other
ic ivau, x3                        // other
# --- system registers and barriers
msr tco, #1                        // msr-tco #1
msr tco, #0                        // msr-tco #0
msr tco, x5                        // msr-tco x5
mrs x7, tco                        // mrs-tco x7
msr sctlr_el1, x3                  // msr sctlr x3
mrs x3, sctlr_el1                  // mrs sctlr x3
msr tcr_el1, x4                    // msr tcr x4
mrs x1, tfsr_el1                   // mrs tfsr x1
mrs x1, tfsre0_el1                 // mrs tfsre0 x1
msr gcr_el1, x2                    // msr gcr x2
msr rgsr_el1, x2                   // msr rgsr x2
msr mair_el1, x2                   // other
dsb ish                            // dsb
dsb sy                             // dsb
dsb ishnxs                         // dsb
dsb synxs                          // dsb
ssbb                               // other
pssbb                              // other
dmb ishld                          // dmb
isb                                // isb
# --- no data access
add x1, x2, x3                     // other
irg x1, x2                         // other
addg x1, x2, #16, #3               // other
hvc #0                             // other
svc #0                             // other
nop                                // other
b .                                // other
# --- in the load/store space but not modelled: reported as unknown
cpyfp [x0]!, [x1]!, x2!            // unknown-mem
cpyfm [x0]!, [x1]!, x2!            // unknown-mem
cpyfe [x0]!, [x1]!, x2!            // unknown-mem
ld64b x0, [x1]                     // unknown-mem
ld1b {z0.b}, p0/z, [x0]            // unknown-mem
st1d {z0.d}, p0, [x0, #1, mul vl]  // unknown-mem
ldr z0, [x0]                       // unknown-mem
ld1w {za0h.s[w12, 0]}, p0/z, [x0]  // unknown-mem
add z0.b, z0.b, z1.b               // other
