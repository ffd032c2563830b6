// A stand-in "hypervisor" that checks the loader's hand-over and powers off: put it on the
// ESP as mtex-hyp.bin. It prints, on the console the BootInfo names,
//   mtex-stub: entered: EL2 mmu-off dcache-off daif-masked bootinfo-magic-ok guest-image-ok cmdline "..."
// (a check that fails is in capitals), then calls PSCI SYSTEM_OFF by SMC.
//
//   aarch64-linux-gnu-as -o stub.o handover-stub.S
//   aarch64-linux-gnu-ld -Ttext=0 -o stub.elf stub.o
//   llvm-objcopy -O binary stub.elf mtex-hyp.bin
//
// BootInfo offsets (platform/src/boot_info.rs, version 1): magic 0, machine.console.base 32,
// guest_image.base 1136, cmdline.base 1152, cmdline.size 1160.
    .text
    .globl _start
_start:                             // arm64 Image header (Linux booting.rst)
    b       start                   // code0
    .long   0                       // code1
    .quad   0                       // text_offset
    .quad   image_end - _start      // image_size
    .quad   0xa                     // flags: little-endian, 4 KiB pages, anywhere
    .quad   0, 0, 0
    .ascii  "ARM\x64"
    .long   0
start:
    mov     x19, x0                 // BootInfo
    ldr     x20, [x19, #32]         // machine.console.base (a PL011)
    adr     x1, msg
    bl      puts
    mrs     x2, CurrentEL
    cmp     x2, #8
    adr     x1, el2
    adr     x3, notel2
    csel    x1, x1, x3, eq
    bl      puts
    mrs     x2, sctlr_el2
    tst     x2, #1                  // M
    adr     x1, mmuoff
    adr     x3, mmuon
    csel    x1, x1, x3, eq
    bl      puts
    tst     x2, #4                  // C
    adr     x1, dcoff
    adr     x3, dcon
    csel    x1, x1, x3, eq
    bl      puts
    mrs     x2, daif
    cmp     x2, #0x3c0              // D, A, I, F
    adr     x1, daifok
    adr     x3, daifbad
    csel    x1, x1, x3, eq
    bl      puts
    ldr     x2, [x19]
    ldr     x3, magic
    cmp     x2, x3
    adr     x1, magicok
    adr     x3, magicbad
    csel    x1, x1, x3, eq
    bl      puts
    ldr     x4, [x19, #1136]        // guest_image.base: an arm64 Image
    ldr     w5, [x4, #56]
    ldr     w6, magic_arm64
    cmp     w5, w6
    adr     x1, guestok
    adr     x3, guestbad
    csel    x1, x1, x3, eq
    bl      puts
    adr     x1, cmdl
    bl      puts
    ldr     x4, [x19, #1152]        // cmdline.base
    ldr     x7, [x19, #1160]        // cmdline.size
4:  cbz     x7, 5f
    ldrb    w5, [x4], #1
6:  ldr     w6, [x20, #0x18]        // UARTFR
    tbnz    w6, #5, 6b              // TXFF
    str     w5, [x20]
    sub     x7, x7, #1
    b       4b
5:  adr     x1, quote_nl
    bl      puts
    ldr     x0, =0x84000008         // PSCI SYSTEM_OFF
    smc     #0
1:  wfe
    b       1b

// x1: NUL-terminated string to the PL011 at x20.
puts:
    ldrb    w5, [x1], #1
    cbz     w5, 3f
2:  ldr     w6, [x20, #0x18]
    tbnz    w6, #5, 2b
    str     w5, [x20]
    b       puts
3:  ret

    .align 3
magic:       .ascii "MTEXBOOT"
magic_arm64: .ascii "ARM\x64"
msg:         .asciz "mtex-stub: entered:"
el2:         .asciz " EL2"
notel2:      .asciz " NOT-EL2"
mmuoff:      .asciz " mmu-off"
mmuon:       .asciz " MMU-ON"
dcoff:       .asciz " dcache-off"
dcon:        .asciz " DCACHE-ON"
daifok:      .asciz " daif-masked"
daifbad:     .asciz " DAIF-OPEN"
magicok:     .asciz " bootinfo-magic-ok"
magicbad:    .asciz " BOOTINFO-MAGIC-BAD"
guestok:     .asciz " guest-image-ok"
guestbad:    .asciz " GUEST-IMAGE-BAD"
cmdl:        .asciz " cmdline \""
quote_nl:    .asciz "\"\n"
    .ltorg
    .align 12
image_end:
